import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { Client } from 'pg';
import { chromium } from 'playwright-core';
import { CHROMIUM_ARGS, findChromium } from '../../test/browser/support/chromium';
import { startService } from '../lib/service';
import { benchTenant } from './support/data-plane';
import { loadAverages, round2, timings } from './support/stats';

const END_USERS = 100_000;
const NAVIGATIONS = 20;
const BREAKDOWN_REQUESTS = 300;
const BUDGET_BYTES = 150 * 1024;

/**
 * The console (contract §28), built (npm run build, which `npm run bench` runs first):
 *
 * 1. What the first page ships: its JavaScript and CSS, gzipped (level 9) and as the Brotli files
 *    the service sends. Goal: ≤ 150 KB gzipped in all.
 * 2. The usage page of an organization with 100,000 end users and a month of replies (the
 *    rollups seeded straight in SQL, as the replies' statements would leave them), in Chromium
 *    on loopback: from the navigation to the page to the chart drawn (the console's own
 *    performance marks). Goal: ≤ 1 s.
 * 3. The breakdown reads the page makes, with the same data: p99 within §23's 50 ms.
 */
export async function run(): Promise<Record<string, unknown>> {
  const shipped = firstPageAssets();
  const executablePath = findChromium();
  if (!executablePath) throw new Error('no Chromium (apt-get install chromium)');

  const service = await startService();
  const db = new Client({ connectionString: service.databaseUrl });
  await db.connect();
  const browser = await chromium.launch({ executablePath, headless: true, args: CHROMIUM_ARGS });
  try {
    const tenant = await benchTenant(service.baseUrl);
    const org = tenant.organizationId;
    const month = new Date().toISOString().slice(0, 7);
    const seedStarted = Date.now();
    await seed(db, org, tenant.personalityId, month);
    const limits = await fetch(`${service.baseUrl}/v1/organizations/${org}/limits`, {
      method: 'PATCH',
      headers: { authorization: tenant.ownerAuth, 'content-type': 'application/json' },
      body: JSON.stringify({ monthly_token_budget: 200_000_000 }),
    });
    if (limits.status !== 200) throw new Error(`limits: ${limits.status}`);
    const seedMs = Date.now() - seedStarted;
    const email = (
      await db.query<{ email: string }>(
        `SELECT u.email FROM users u JOIN memberships m ON m.user_id = u.id WHERE m.organization_id = $1`,
        [org],
      )
    ).rows[0].email;

    // The page, as a person opens it: sign in (the bench tenant's password), then the usage page.
    const page = await browser.newPage({ viewport: { width: 1280, height: 880 } });
    const loadStarted = Date.now();
    await page.goto(`${service.baseUrl}/console`);
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    const signInShownMs = Date.now() - loadStarted;
    await page.getByLabel('E-mail').fill(email);
    await page.getByLabel('Password').fill('bench password long enough');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('.chart[data-drawn="true"]').waitFor({ timeout: 30_000 });
    const afterSignIn = await navigationToChart(page);

    // Then back and forth between two pages: each arrival on the usage page draws the month anew.
    const arrivals: number[] = [];
    for (let i = 0; i < NAVIGATIONS; i++) {
      await page.getByRole('link', { name: 'API keys' }).click();
      await page.getByRole('heading', { level: 1, name: 'API keys' }).waitFor();
      await page.getByRole('link', { name: 'Usage' }).click();
      await page.locator('.chart[data-drawn="true"]').waitFor({ timeout: 30_000 });
      arrivals.push(await navigationToChart(page));
    }
    // The breakdown by end user, 100 rows of 100,000, shown after the choice.
    const byEndUser: number[] = [];
    for (let i = 0; i < 5; i++) {
      const started = Date.now();
      await page.getByLabel('Break down by').selectOption(i % 2 === 0 ? 'end_user' : 'personality');
      await page
        .getByTestId('breakdown')
        .locator('tr')
        .nth(i % 2 === 0 ? 99 : 0)
        .waitFor();
      byEndUser.push(Date.now() - started);
    }

    const reads = await breakdownReads(service.baseUrl, tenant.auth, month, db, org);
    return {
      load_averages_before: loadAverages(),
      first_page: shipped,
      usage_page: {
        end_users: END_USERS,
        seed_ms: seedMs,
        sign_in_form_shown_ms: signInShownMs,
        chart_drawn_after_sign_in_ms: round2(afterSignIn),
        chart_drawn_after_navigation: timings(arrivals),
        breakdown_rows_shown_after_choice: timings(byEndUser),
        goal_ms: 1000,
      },
      breakdown_reads: reads,
      load_averages_after: loadAverages(),
    };
  } finally {
    await browser.close();
    await db.end();
    await service.stop();
  }
}

/** The JavaScript and CSS the page names, gzipped and as the Brotli copies the service sends. */
function firstPageAssets() {
  const web = join(__dirname, '..', '..', 'dist', 'web');
  const html = readFileSync(join(web, 'index.html'), 'utf8');
  const files = [...html.matchAll(/(?:src|href)="\/console\/(assets\/[^"]+\.(?:js|css))"/g)].map(
    (match) => match[1],
  );
  const each = files.map((file) => {
    const bytes = readFileSync(join(web, file));
    return {
      file,
      bytes: bytes.length,
      gzip_bytes: gzipSync(bytes, { level: 9 }).length,
      brotli_bytes: statSync(join(web, `${file}.br`)).size,
    };
  });
  const gzip = each.reduce((sum, file) => sum + file.gzip_bytes, 0);
  if (gzip > BUDGET_BYTES) throw new Error(`the first page ships ${gzip} bytes gzipped`);
  return {
    files: each,
    total_gzip_bytes: gzip,
    total_brotli_bytes: each.reduce((sum, file) => sum + file.brotli_bytes, 0),
    budget_gzip_bytes: BUDGET_BYTES,
  };
}

/** The time from the console's last navigation to the first chart drawn after it. */
async function navigationToChart(page: import('playwright-core').Page): Promise<number> {
  return page.evaluate(() => {
    const [navigation] = performance.getEntriesByName('console:navigate');
    const drawn = performance
      .getEntriesByName('console:usage-chart-drawn')
      .find((mark) => mark.startTime >= navigation.startTime);
    if (!drawn) throw new Error('the chart was not drawn after the navigation');
    return drawn.startTime - navigation.startTime;
  });
}

/**
 * 100,000 end users with a month of replies (10 on average each, 150 tokens a reply) in the
 * rollups the page reads: by day, end user, personality (50), API key (10), model (3).
 */
async function seed(db: Client, org: string, personalityId: string, month: string) {
  const start = `${month}-01`;
  await db.query(
    `INSERT INTO end_users (organization_id, user_id)
     SELECT $1, 'bench-user-' || g FROM generate_series(1, $2) g`,
    [org, END_USERS],
  );
  await db.query(
    `INSERT INTO token_usage_end_user_months
       (organization_id, month, end_user_id, requests, prompt_tokens, completion_tokens,
        cached_tokens, total_tokens)
     SELECT $1, $2::date, e.id, r, r * 100, r * 50, r * 10, r * 150
       FROM (SELECT id, 1 + (abs(hashtext(id::text)) % 19) AS r FROM end_users
              WHERE organization_id = $1) e`,
    [org, start],
  );
  const days = new Date(
    Date.UTC(Number(month.slice(0, 4)), Number(month.slice(5)), 0),
  ).getUTCDate();
  await db.query(
    `INSERT INTO token_usage_days (organization_id, day, requests, prompt_tokens,
                                   completion_tokens, cached_tokens)
     SELECT $1, $2::date + (d - 1), 33000 + d * 100, 3300000 + d * 10000, 1650000, 330000
       FROM generate_series(1, $3) d`,
    [org, start, days],
  );
  await db.query(
    `INSERT INTO token_usage_months (organization_id, month, requests, prompt_tokens,
                                     completion_tokens, cached_tokens)
     SELECT $1, $2::date, sum(requests), sum(prompt_tokens), sum(completion_tokens),
            sum(cached_tokens)
       FROM token_usage_days WHERE organization_id = $1`,
    [org, start],
  );
  for (const [table, column, count] of [
    ['token_usage_personality_months', 'personality_id', 50],
    ['token_usage_api_key_months', 'api_key_id', 10],
  ] as const) {
    await db.query(
      `INSERT INTO ${table} (organization_id, month, ${column}, requests, prompt_tokens,
                             completion_tokens, cached_tokens, total_tokens)
       SELECT $1, $2::date, CASE WHEN g = 1 THEN $4::uuid ELSE gen_random_uuid() END,
              20000 * g, 2000000 * g, 1000000 * g, 0, 3000000 * g
         FROM generate_series(1, $3) g`,
      [
        org,
        start,
        count,
        column === 'personality_id' ? personalityId : '00000000-0000-0000-0000-000000000000',
      ],
    );
  }
  await db.query(
    `INSERT INTO token_usage_model_months (organization_id, month, model, requests, prompt_tokens,
                                           completion_tokens, cached_tokens)
     SELECT $1, $2::date, 'model-' || g, 300000, 30000000, 15000000, 0 FROM generate_series(1, 3) g`,
    [org, start],
  );
  await db.query('ANALYZE');
}

/** The page's reads over HTTP, one at a time: p50/p99 per grouping. */
async function breakdownReads(
  baseUrl: string,
  auth: string,
  month: string,
  db: Client,
  org: string,
) {
  const base = `${baseUrl}/v1/usage/breakdown?month=${month}`;
  const userIds = (
    await db.query<{ user_id: string }>(
      'SELECT user_id FROM end_users WHERE organization_id = $1 ORDER BY random() LIMIT $2',
      [org, BREAKDOWN_REQUESTS],
    )
  ).rows.map((row) => row.user_id);
  const time = async (urls: string[]) => {
    const ms: number[] = [];
    for (const url of urls) {
      const started = process.hrtime.bigint();
      const response = await fetch(url, { headers: { authorization: auth } });
      await response.arrayBuffer();
      if (response.status !== 200) throw new Error(`${url}: ${response.status}`);
      ms.push(Number(process.hrtime.bigint() - started) / 1e6);
    }
    return timings(ms);
  };
  const repeat = (url: string) => Array.from({ length: BREAKDOWN_REQUESTS }, () => url);
  await time(repeat(`${base}&group_by=end_user&limit=100`).slice(0, 50));
  return {
    goal_p99_ms: 50,
    day: await time(repeat(`${base}&group_by=day&limit=31`)),
    end_user_first_page: await time(repeat(`${base}&group_by=end_user&limit=100`)),
    end_user_any_page: await time(
      userIds.map(
        (id) => `${base}&group_by=end_user&limit=100&starting_after=${encodeURIComponent(id)}`,
      ),
    ),
    personality: await time(repeat(`${base}&group_by=personality&limit=100`)),
    api_key: await time(repeat(`${base}&group_by=api_key&limit=100`)),
    tokens: await time(repeat(`${baseUrl}/v1/usage/tokens?month=${month}`)),
  };
}
