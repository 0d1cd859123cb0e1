// The types of build.mjs, which is JavaScript so that plain Node can run the build.
import type { BuildResult } from 'esbuild';

interface PackageManifest {
  dependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
}

/** Every package the app or the platform names, but the bundled platform and drizzle-orm: each and its subpaths. */
export declare function externalPackages(app: PackageManifest): string[];

export interface NodeAppBuild {
  /** The app's folder: its package.json, and what the entry points and outdir are relative to. */
  root: string;
  /** Output name -> source, as esbuild takes them: `{ node: 'src/node.ts' }` writes `<outdir>/node.js`. */
  entryPoints: Record<string, string>;
  /** `dist` by default; lazy imports go to `<outdir>/chunks/`. */
  outdir?: string;
}

/** Bundles the app's Node entries (ESM, Node 24, source maps), the platform and drizzle-orm inside. */
export declare function buildNodeApp(options: NodeAppBuild): Promise<BuildResult>;
