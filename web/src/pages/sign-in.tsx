import { useEffect, useState } from 'preact/hooks';
import { api } from '../api';
import { currentRoute, navigate } from '../router';
import type { Login } from '../types';
import { ErrorNotice, Link, Notice, PageTitle, useAction } from '../ui';

type Mode = 'sign-in' | 'sign-up' | 'forgot';

/**
 * Signing in: e-mail and password (POST /v1/auth/login), or a new account (sign-up), or a reset
 * link by mail. The token answered is kept in memory only.
 */
export function SignInPage(props: {
  notice: string | null;
  invitation: boolean;
  onSignedIn: (login: Login) => Promise<void>;
}) {
  const [mode, setMode] = useState<Mode>('sign-in');
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [name, setName] = useState('');
  const [sent, setSent] = useState(false);
  const action = useAction();
  const titles: Record<Mode, string> = {
    'sign-in': 'Sign in',
    'sign-up': 'Create an account',
    forgot: 'Reset your password',
  };
  const submit = (event: Event) => {
    event.preventDefault();
    void action.run(async () => {
      if (mode === 'forgot') {
        await api('POST', '/v1/auth/forgot-password', { body: { email }, anonymous: true });
        setSent(true);
        return;
      }
      const login =
        mode === 'sign-in'
          ? await api<Login>('POST', '/v1/auth/login', {
              body: { email, password },
              anonymous: true,
            })
          : await api<Login>('POST', '/v1/auth/signup', {
              body: { email, password, ...(name ? { name } : {}) },
              anonymous: true,
            });
      setPassword('');
      await props.onSignedIn(login);
    });
  };
  const switchTo = (next: Mode) => {
    setMode(next);
    setSent(false);
    action.clear();
  };
  return (
    <main class="center" id="main">
      <div class="card narrow">
        <PageTitle title={titles[mode]} />
        {props.notice ? <Notice>{props.notice}</Notice> : null}
        {props.invitation ? (
          <p>
            You were invited to an organization. Sign in, or create an account, with the address the
            invitation was sent to.
          </p>
        ) : null}
        {sent ? (
          <Notice>If an account uses {email}, a mail with a reset link is on its way.</Notice>
        ) : (
          <form onSubmit={submit}>
            <label>
              E-mail
              <input
                type="email"
                required
                autoComplete="username"
                value={email}
                onInput={(e) => setEmail(e.currentTarget.value)}
              />
            </label>
            {mode === 'sign-up' ? (
              <label>
                Name (optional)
                <input
                  autoComplete="name"
                  value={name}
                  maxLength={200}
                  onInput={(e) => setName(e.currentTarget.value)}
                />
              </label>
            ) : null}
            {mode !== 'forgot' ? (
              <label>
                Password
                <input
                  type="password"
                  required
                  minLength={mode === 'sign-up' ? 12 : undefined}
                  autoComplete={mode === 'sign-up' ? 'new-password' : 'current-password'}
                  value={password}
                  onInput={(e) => setPassword(e.currentTarget.value)}
                />
                {mode === 'sign-up' ? <span class="small">12 to 256 characters.</span> : null}
              </label>
            ) : null}
            <ErrorNotice error={action.error} />
            <button type="submit" disabled={action.busy}>
              {action.busy ? 'Working…' : mode === 'forgot' ? 'Mail me a reset link' : titles[mode]}
            </button>
          </form>
        )}
        <p class="alternatives">
          {mode !== 'sign-in' ? (
            <button type="button" class="link" onClick={() => switchTo('sign-in')}>
              Sign in
            </button>
          ) : null}
          {mode !== 'sign-up' ? (
            <button type="button" class="link" onClick={() => switchTo('sign-up')}>
              Create an account
            </button>
          ) : null}
          {mode !== 'forgot' ? (
            <button type="button" class="link" onClick={() => switchTo('forgot')}>
              Forgot your password?
            </button>
          ) : null}
        </p>
        <p class="small">
          The console keeps your session in this tab's memory only: a reload signs you in again.
        </p>
      </div>
    </main>
  );
}

/**
 * The token of a mail link, taken out of the address at once (so the tab's history entry, a
 * bookmark or a screenshot after this holds none; the browser's history has recorded the address
 * as opened, docs/console.md), kept in the page's state.
 */
function useLinkToken(): string | null {
  const [token] = useState(() => currentRoute().query.get('token'));
  useEffect(() => {
    if (token) history.replaceState(null, '', location.pathname);
  }, []);
  return token;
}

/** The page of the reset link (APP_PUBLIC_URL/console/reset-password?token=…). */
export function ResetPasswordPage() {
  const token = useLinkToken();
  const [password, setPassword] = useState('');
  const [done, setDone] = useState(false);
  const action = useAction();
  return (
    <main class="center" id="main">
      <div class="card narrow">
        <PageTitle title="Choose a new password" />
        {!token ? (
          <ErrorNotice error="This page needs the link from the reset mail. Ask for a new one from the sign-in page." />
        ) : done ? (
          <Notice>
            Your password is changed, and your other sessions are ended. <Link to="/">Sign in</Link>
          </Notice>
        ) : (
          <form
            onSubmit={(event) => {
              event.preventDefault();
              void action.run(async () => {
                await api('POST', '/v1/auth/reset-password', {
                  body: { token, new_password: password },
                  anonymous: true,
                });
                setPassword('');
                setDone(true);
              });
            }}
          >
            <label>
              New password
              <input
                type="password"
                required
                minLength={12}
                maxLength={256}
                autoComplete="new-password"
                value={password}
                onInput={(e) => setPassword(e.currentTarget.value)}
              />
              <span class="small">12 to 256 characters.</span>
            </label>
            <ErrorNotice error={action.error} />
            <button type="submit" disabled={action.busy}>
              Set the password
            </button>
          </form>
        )}
        <p>
          <Link to="/">Back to sign-in</Link>
        </p>
      </div>
    </main>
  );
}

/**
 * The page of the verification link (APP_PUBLIC_URL/console/verify-email?token=…). It verifies
 * only when the reader confirms that they made the account: opened by a mail scanner, or by the
 * address's owner who did not sign up (someone else did, with their address), nothing happens.
 * Verified, the account would keep what its maker made through a reset by the address's owner
 * (found by review: the page verified on load).
 */
export function VerifyEmailPage() {
  const token = useLinkToken();
  const [done, setDone] = useState(false);
  const action = useAction();
  return (
    <main class="center" id="main">
      <div class="card narrow">
        <PageTitle title="Verify your e-mail address" />
        {!token ? (
          <ErrorNotice error="This page needs the link from the verification mail." />
        ) : done ? (
          <Notice>Your e-mail address is verified.</Notice>
        ) : (
          <form
            onSubmit={(event) => {
              event.preventDefault();
              void action.run(async () => {
                await api('POST', '/v1/auth/verify-email', { body: { token }, anonymous: true });
                setDone(true);
              });
            }}
          >
            <p>Confirm only if you created an account on this service with this address.</p>
            <p>
              If you did not, someone else signed up with your address: do not confirm. Ask for a
              password reset with your address on the <Link to="/">sign-in page</Link> instead; the
              reset gives you the account and ends their sessions, keys and webhooks.
            </p>
            <ErrorNotice error={action.error} />
            <button type="submit" disabled={action.busy}>
              I created this account: verify my address
            </button>
          </form>
        )}
        <p>
          <button type="button" class="link" onClick={() => navigate('/')}>
            Go to the console
          </button>
        </p>
      </div>
    </main>
  );
}
