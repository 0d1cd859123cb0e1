// The connect callback's page (src/app/connections/callback-page.ts): names are escaped, a consent whose
// tenants were all refused says nothing was connected, and content negotiation picks JSON only on ask.
import { describe, expect, it } from 'vitest';
import { errorPage, escapeHtml, successPage, wantsJson } from '../../src/app/connections/callback-page.js';

const organization = { id: 'o1', name: `O'Brien & <Co>` };

describe('the callback page', () => {
  it('escapes every character that could open markup or an attribute', () => {
    expect(escapeHtml(`<a href="x" onclick='y'>&</a>`)).toBe(
      '&lt;a href=&quot;x&quot; onclick=&#39;y&#39;&gt;&amp;&lt;/a&gt;',
    );
  });

  it('names the organization and the tenants, and asks for confirmation', () => {
    const html = successPage({
      organization,
      connected: [{ id: 'c1', tenantId: 't1', tenantName: '<img src=x onerror=alert(1)>' }],
      refused: [{ tenantId: 't2', tenantName: 'Held Ltd', reason: 'held_by_another_organization' }],
    });
    expect(html).toContain('O&#39;Brien &amp; &lt;Co&gt;');
    expect(html).toContain('&lt;img src=x onerror=alert(1)&gt;');
    expect(html).not.toContain('<img');
    expect(html).toMatch(/<h2>Refused<\/h2>[\s\S]*Held Ltd/);
    expect(html).toMatch(/Confirmation required/);
  });

  it('says nothing was connected when every tenant was refused', () => {
    const html = successPage({
      organization,
      connected: [],
      refused: [{ tenantId: 't2', tenantName: 'Held Ltd', reason: 'held_by_another_organization' }],
    });
    expect(html).toMatch(/<title>Xero was not connected<\/title>/);
    expect(html).toMatch(/No tenant was connected/);
    expect(html).not.toMatch(/Confirmation required/);
  });

  it('escapes error messages too', () => {
    expect(errorPage('invalid_state', '<b>x</b>')).toContain('&lt;b&gt;x&lt;/b&gt;');
  });

  it('answers JSON only when asked for it', () => {
    expect(wantsJson('application/json')).toBe(true);
    expect(wantsJson('text/html,application/xhtml+xml,*/*;q=0.8')).toBe(false);
    expect(wantsJson('*/*')).toBe(false);
    expect(wantsJson(undefined)).toBe(false);
  });
});
