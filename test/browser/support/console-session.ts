import { mkdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  type Browser,
  type BrowserContext,
  chromium,
  type Page,
  type Request,
} from 'playwright-core';
import { CHROMIUM_ARGS } from './chromium';

const root = join(__dirname, '..', '..', '..');
/**
 * Where the pages are photographed: docs/console-screenshots/ when the run is asked to retake
 * docs/console.md's pictures (`npm run docs:screenshots`), else a temporary folder, so a test run
 * leaves the checkout as it found it.
 */
export const SCREENSHOTS =
  process.env.CONSOLE_SCREENSHOTS === 'docs'
    ? join(root, 'docs', 'console-screenshots')
    : join(tmpdir(), `personality-api-console-screenshots-${process.pid}`);
const AXE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: Array<{ target: string[]; failureSummary?: string }>;
}

/**
 * A browser on the console: one context (its own empty profile), the page a person works in, and
 * what went wrong on it: console errors, uncaught exceptions, CSP violations, dialogs (`alert`).
 */
export class ConsoleBrowser {
  readonly problems: string[] = [];
  page!: Page;
  /** The API calls of each tab sent and not yet answered. */
  private readonly callsInFlight = new WeakMap<Page, number>();
  private browser!: Browser;
  context!: BrowserContext;

  constructor(
    private readonly executablePath: string,
    readonly baseUrl: string,
  ) {}

  async start(): Promise<this> {
    this.browser = await chromium.launch({
      executablePath: this.executablePath,
      headless: true,
      args: CHROMIUM_ARGS,
    });
    // A time zone far from UTC: the console must show UTC days whatever the person's zone is.
    this.context = await this.browser.newContext({
      baseURL: this.baseUrl,
      viewport: { width: 1280, height: 880 },
      timezoneId: 'Pacific/Auckland',
      locale: 'en-US',
      acceptDownloads: true,
    });
    await this.context.grantPermissions(['clipboard-read', 'clipboard-write'], {
      origin: this.baseUrl,
    });
    this.context.setDefaultTimeout(10_000);
    this.page = await this.newPage();
    return this;
  }

  /** A tab of the context (a mail link opens one), watched like the first. */
  async newPage(): Promise<Page> {
    const page = await this.context.newPage();
    page.on('console', (message) => {
      if (message.type() === 'error') this.problems.push(`console error: ${message.text()}`);
    });
    page.on('pageerror', (error) => this.problems.push(`uncaught: ${error.message}`));
    page.on('dialog', (dialog) => {
      this.problems.push(`dialog: ${dialog.message()}`);
      void dialog.dismiss();
    });
    this.callsInFlight.set(page, 0);
    const count = (request: Request, step: number) => {
      if (new URL(request.url()).pathname.startsWith('/v1/')) {
        this.callsInFlight.set(page, (this.callsInFlight.get(page) ?? 0) + step);
      }
    };
    page.on('request', (request) => count(request, 1));
    page.on('requestfinished', (request) => count(request, -1));
    page.on('requestfailed', (request) => count(request, -1));
    // Init scripts run through the DevTools protocol, which the page's CSP does not govern.
    await page.addInitScript(() => {
      document.addEventListener('securitypolicyviolation', (event) => {
        console.error(`CSP violation: ${event.violatedDirective} ${event.blockedURI}`);
      });
    });
    return page;
  }

  /**
   * Until every API call the tab has sent is answered: a page's loads start together when it
   * renders, and its heading shows before they end (`networkidle` only watches a navigation,
   * which a console page is not).
   */
  async untilCallsAnswered(page: Page = this.page, timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while ((this.callsInFlight.get(page) ?? 0) > 0) {
      if (Date.now() > deadline) {
        throw new Error(
          `${this.callsInFlight.get(page)} API calls unanswered after ${timeoutMs} ms`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  /** What went wrong since the last call (and forgets it). */
  takeProblems(): string[] {
    return this.problems.splice(0);
  }

  /** axe-core's serious and critical findings on the page as it is now. */
  async accessibility(page: Page = this.page): Promise<AxeViolation[]> {
    // Evaluated through the DevTools protocol: no script tag, so the CSP stays as it is.
    await page.evaluate(AXE);
    const violations = await page.evaluate(async () => {
      const axe = (window as unknown as { axe: { run: (...args: unknown[]) => Promise<unknown> } })
        .axe;
      const result = (await axe.run(document, { resultTypes: ['violations'] })) as {
        violations: AxeViolation[];
      };
      return result.violations;
    });
    return violations
      .filter((violation) => violation.impact === 'serious' || violation.impact === 'critical')
      .map((violation) => ({
        ...violation,
        nodes: violation.nodes.slice(0, 3).map((node) => ({
          target: node.target,
          failureSummary: node.failureSummary,
        })),
      }));
  }

  /** The page from its top (or all of it), as docs/console.md shows it. */
  async screenshot(
    name: string,
    page: Page = this.page,
    options: { fullPage?: boolean } = {},
  ): Promise<void> {
    mkdirSync(SCREENSHOTS, { recursive: true });
    await page.evaluate(() => scrollTo(0, 0));
    await page.screenshot({
      path: join(SCREENSHOTS, `${name}.png`),
      animations: 'disabled',
      caret: 'hide',
      fullPage: options.fullPage ?? false,
    });
  }

  async close(): Promise<void> {
    await this.browser?.close();
  }
}
