// GET /api.xro/2.0/Organisation: the connected tenant's organisation details.
import { Hono } from 'hono';
import { type ApiEnv, envelope, requireScope } from './api-guards.js';
import { json } from './errors.js';
import { msDate } from './ids.js';
import type { SandboxState } from './state.js';

const VERSIONS = new Set(['AU', 'NZ', 'UK', 'US']);

/** Mounted under the API prefix after the token, tenant and rate-limit guards. */
export function organisationRoutes(state: SandboxState): Hono<ApiEnv> {
  const app = new Hono<ApiEnv>();
  app.get('/Organisation', requireScope(state, ['accounting.settings', 'accounting.settings.read']), (c) => {
    const tenant = c.get('tenant');
    return json(
      200,
      envelope(state, {
        Organisations: [
          {
            OrganisationID: tenant.id,
            APIKey: '',
            Name: tenant.name,
            LegalName: tenant.name,
            PaysTax: true,
            Version: VERSIONS.has(tenant.countryCode) ? tenant.countryCode : 'GLOBAL',
            OrganisationType: 'COMPANY',
            BaseCurrency: tenant.baseCurrency,
            CountryCode: tenant.countryCode,
            IsDemoCompany: false,
            OrganisationStatus: 'ACTIVE',
            ShortCode: tenant.shortCode,
            Edition: 'BUSINESS',
            Class: 'STANDARD',
            CreatedDateUTC: msDate(tenant.createdAt),
          },
        ],
      }),
    );
  });
  return app;
}
