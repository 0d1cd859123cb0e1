// The consent page a person sees when the sandbox runs with `consentPage` (development mode): Xero's
// authorize step is a page where the user picks the organisation to connect and allows or cancels
// (developer.xero.com/documentation/guides/oauth2/auth-flow, "Authorize"). The form posts the request's
// own parameters back to the authorize endpoint with the decision.
import type { Tenant } from './state.js';

/** The form fields the page adds to the authorize request's parameters. */
export const CONSENT_FIELDS = { decision: 'decision', tenant: 'tenant', tenantName: 'tenant_name' } as const;
/** The `tenant` value that asks for a new organisation (named by `tenant_name`). */
export const NEW_TENANT = 'new';

const html = (value: string) => value.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);

export function consentPage(input: {
  action: string;
  params: Record<string, string>;
  providerName: string;
  tenants: readonly Tenant[];
  suggestedName: string;
}): string {
  const hidden = Object.entries(input.params)
    .map(([name, value]) => `<input type="hidden" name="${html(name)}" value="${html(value)}">`)
    .join('\n    ');
  const existing = input.tenants
    .map(
      (t) =>
        `<label><input type="radio" name="${CONSENT_FIELDS.tenant}" value="${html(t.id)}"> ${html(t.name)}</label><br>`,
    )
    .join('\n    ');
  return `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Xero sandbox: allow access</title></head>
<body>
  <h1>${html(input.providerName)} wants to access your Xero organisation</h1>
  <p>This is the local Xero sandbox: nothing here reaches Xero.</p>
  <form method="post" action="${html(input.action)}">
    ${hidden}
    <fieldset>
      <legend>Organisation to connect</legend>
      <label><input type="radio" name="${CONSENT_FIELDS.tenant}" value="${NEW_TENANT}" checked> A new organisation:</label>
      <input type="text" name="${CONSENT_FIELDS.tenantName}" value="${html(input.suggestedName)}"><br>
    ${existing}
    </fieldset>
    <button type="submit" name="${CONSENT_FIELDS.decision}" value="allow">Allow access</button>
    <button type="submit" name="${CONSENT_FIELDS.decision}" value="deny">Cancel</button>
  </form>
</body>
</html>
`;
}
