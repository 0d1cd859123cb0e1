// The readiness gate: closed while booting, open once late in boot, closed again for good when
// shutdown begins. Transitions only move forward so a late boot step cannot reopen a draining server.

export type GateState = 'booting' | 'ok' | 'draining' | 'failed';

export class ReadinessGate {
  #state: GateState = 'booting';

  get state(): GateState {
    return this.#state;
  }

  get isOpen(): boolean {
    return this.#state === 'ok';
  }

  open(): void {
    if (this.#state === 'booting') this.#state = 'ok';
  }

  drain(): void {
    if (this.#state !== 'failed') this.#state = 'draining';
  }

  fail(): void {
    this.#state = 'failed';
  }
}
