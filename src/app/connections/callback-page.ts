// The connect callback's answer, as JSON (for scripts and tests) or as a small HTML page for the
// person in the browser. Every value that reaches the HTML is escaped: tenant and organization names
// come from Xero and from API callers.

import type { SavedGrant } from './grants.js';

export interface ConnectResult {
  organization: { id: string; name: string };
  connected: SavedGrant['connected'];
  refused: SavedGrant['refused'];
}

/** What the organization must do before any invoice flows to a tenant it just connected. */
export function confirmation(connected: ConnectResult['connected']) {
  return {
    required: true,
    message:
      'No invoice is sent to a connected tenant until the organization confirms it with its API key: ' +
      'POST /api/connections/{id}/default makes it the default for new invoices; ' +
      'POST /api/connections/{id}/choose allows tenantId on POST /api/invoices.',
    actions: connected.flatMap((t) => [
      { method: 'POST', path: `/api/connections/${t.id}/default` },
      { method: 'POST', path: `/api/connections/${t.id}/choose` },
    ]),
  };
}

/** HTML for a browser; JSON when the client asks for it (Accept: application/json). */
export function wantsJson(accept: string | undefined): boolean {
  return /\bapplication\/json\b/i.test(accept ?? '');
}

const ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};
export const escapeHtml = (text: string): string => text.replace(/[&<>"']/g, (ch) => ESCAPES[ch] ?? ch);

const page = (title: string, body: string) =>
  `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<meta name="referrer" content="no-referrer"><title>${escapeHtml(title)}</title></head>
<body><main>
<h1>${escapeHtml(title)}</h1>
${body}
</main></body></html>
`;

const tenantName = (t: { tenantId: string; tenantName: string | null }) =>
  `${escapeHtml(t.tenantName ?? '(unnamed)')} <code>${escapeHtml(t.tenantId)}</code>`;

export function successPage(result: ConnectResult): string {
  const { organization, connected, refused } = result;
  const name = `<strong>${escapeHtml(organization.name)}</strong>`;
  const parts = [
    connected.length > 0
      ? `<p>Xero is connected for the organization ${name}.</p>`
      : `<p>No tenant was connected for the organization ${name}.</p>`,
  ];
  if (connected.length > 0) {
    parts.push(
      '<h2>Connected</h2><ul>',
      ...connected.map((t) => `<li>${tenantName(t)} (connection <code>${escapeHtml(t.id)}</code>)</li>`),
      '</ul>',
    );
  }
  if (refused.length > 0) {
    parts.push(
      '<h2>Refused</h2><p>These tenants are held by another organization and were not connected.</p><ul>',
      ...refused.map((t) => `<li>${tenantName(t)}</li>`),
      '</ul>',
    );
  }
  if (connected.length === 0) return page('Xero was not connected', parts.join('\n'));
  parts.push(
    `<h2>Confirmation required</h2>
<p>No invoice is sent to these tenants yet. ${name} must confirm
a tenant with its API key: <code>POST /api/connections/{id}/default</code> makes it the default for new
invoices, or <code>POST /api/connections/{id}/choose</code> allows <code>tenantId</code> on
<code>POST /api/invoices</code>. If you did not expect to connect this organization, tell its owner:
nothing flows until they confirm.</p>`,
  );
  return page('Xero connected', parts.join('\n'));
}

/**
 * What GET of a connect link shows: a button that POSTs to the same address. A mail scanner or chat
 * preview that fetches the link sees this page and spends nothing; the person's click spends it.
 */
export function confirmPage(action: string): string {
  return page(
    'Connect Xero',
    `<p>This link connects an organization to Xero. It works once: continue only if you meant to open it.</p>
<form method="post" action="${escapeHtml(action)}"><button type="submit">Continue to Xero</button></form>`,
  );
}

export function errorPage(code: string, message: string): string {
  return page(
    'Xero was not connected',
    `<p>${escapeHtml(message)}</p><p>Error: <code>${escapeHtml(code)}</code></p>`,
  );
}
