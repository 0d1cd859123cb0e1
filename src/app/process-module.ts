import type { ProcessAppModule } from '@honest-health/platform';
import type { AuthEnv } from './auth.js';
import type { AppConfig } from './config.js';
import { migrations } from './migrations.gen.js';
import { honestHealth } from './module.js';

/** honest-health as Node and Bun run it: the app module with the migrations boot applies. */
export const honestHealthProcess: ProcessAppModule<AppConfig, AuthEnv> = { ...honestHealth, migrations };
