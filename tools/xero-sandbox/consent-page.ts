// The consent page (option consentPage): what login.xero.com shows a signed-in user before it redirects
// back, the organisations to connect and an "Allow access" button, so a browser test clicks through a
// page as a person does. Its form POSTs the authorize request back to the same path.

const ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};
const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (ch) => ESCAPES[ch] ?? ch);

export function consentPage(input: {
  appName: string;
  query: Record<string, string>;
  scopes: string[];
  tenants: { id: string; name: string }[];
}): string {
  const hidden = Object.entries(input.query)
    .map(([name, value]) => `<input type="hidden" name="${escapeHtml(name)}" value="${escapeHtml(value)}">`)
    .join('\n');
  const tenants = input.tenants.map((t) => `<li>${escapeHtml(t.name)}</li>`).join('\n');
  const scopes = input.scopes.map((s) => `<li><code>${escapeHtml(s)}</code></li>`).join('\n');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Xero Sandbox: allow access</title></head>
<body><main>
<h1>${escapeHtml(input.appName)} wants access to your Xero data</h1>
<h2>Organisations</h2><ul>${tenants}</ul>
<h2>Permissions</h2><ul>${scopes}</ul>
<form method="post">
${hidden}
<button type="submit" name="decision" value="allow">Allow access</button>
<button type="submit" name="decision" value="deny">Cancel</button>
</form>
</main></body></html>
`;
}
