// The readiness gate (packages/platform/src/http/gate.ts): closed while booting, open once, and closed for good
// once shutdown begins, whatever a late boot step does.

import { describe, expect, it } from 'vitest';
import { ReadinessGate } from '../src/http/gate.js';

describe('readiness gate', () => {
  it('is closed while booting and opens once', () => {
    const gate = new ReadinessGate();
    expect([gate.state, gate.isOpen]).toEqual(['booting', false]);
    gate.open();
    expect([gate.state, gate.isOpen]).toEqual(['ok', true]);
    gate.open();
    expect(gate.state).toBe('ok');
  });

  it('closes when shutdown begins, and a late open() cannot reopen a draining server', () => {
    const open = new ReadinessGate();
    open.open();
    open.drain();
    open.open();
    expect([open.state, open.isOpen]).toEqual(['draining', false]);
    // Shutdown during boot: the boot's last step must not open the gate after it.
    const booting = new ReadinessGate();
    booting.drain();
    booting.open();
    expect([booting.state, booting.isOpen]).toEqual(['draining', false]);
  });

  it('stays closed after a failed boot, even when shutdown begins', () => {
    const gate = new ReadinessGate();
    gate.fail();
    expect([gate.state, gate.isOpen]).toEqual(['failed', false]);
    gate.drain();
    expect(gate.state).toBe('failed');
  });
});
