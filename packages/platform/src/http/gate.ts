// The readiness gate: closed while booting, open once late in boot, closed again for good when
// shutdown begins: nothing reopens a draining server. A failed boot may be retried (a Worker isolate
// retries after a back-off), so a later success opens a failed gate.

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
    if (this.#state === 'booting' || this.#state === 'failed') this.#state = 'ok';
  }

  drain(): void {
    if (this.#state !== 'failed') this.#state = 'draining';
  }

  fail(): void {
    this.#state = 'failed';
  }
}
