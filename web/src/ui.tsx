import type { ComponentChildren, SelectHTMLAttributes } from 'preact';
import { useEffect, useId, useRef, useState } from 'preact/hooks';
import { ApiError } from './api';
import { visibleId } from './format';
import { BASE, navigate } from './router';

/** A link inside the console: the router's navigation, a real href for the keyboard and new tabs. */
export function Link(props: {
  to: string;
  children: ComponentChildren;
  class?: string;
  current?: boolean;
}) {
  return (
    <a
      href={`${BASE}${props.to === '/' ? '' : props.to}`}
      class={props.class}
      aria-current={props.current ? 'page' : undefined}
      onClick={(event) => {
        if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey)
          return;
        event.preventDefault();
        navigate(props.to);
      }}
    >
      {props.children}
    </a>
  );
}

/** An API error as the API said it: its message and the request id to quote to support. */
export function ErrorNotice({ error }: { error: unknown }) {
  if (!error) return null;
  const apiError = error instanceof ApiError ? error : null;
  return (
    <div class="notice error" role="alert">
      <p>
        {apiError
          ? apiError.message
          : error instanceof Error
            ? error.message
            : typeof error === 'string'
              ? error
              : 'Something went wrong.'}
      </p>
      {apiError?.requestId ? (
        <p class="small">
          Request id <code>{apiError.requestId}</code>
          {apiError.code ? (
            <>
              {' '}
              · <code>{apiError.code}</code>
            </>
          ) : null}
        </p>
      ) : null}
    </div>
  );
}

export function Loading({ what = 'Loading' }: { what?: string }) {
  return (
    <p class="loading" role="status">
      {what}…
    </p>
  );
}

export function Empty({ children }: { children: ComponentChildren }) {
  return <p class="empty">{children}</p>;
}

export function Notice({ children }: { children: ComponentChildren }) {
  return (
    <div class="notice success" role="status">
      {children}
    </div>
  );
}

/** A table that scrolls sideways on a narrow screen, reachable by keyboard. */
export function TableWrap({ label, children }: { label: string; children: ComponentChildren }) {
  return (
    <div class="table-wrap" tabIndex={0} role="region" aria-label={label}>
      <table>{children}</table>
    </div>
  );
}

/**
 * Loads something when its inputs change; `reload()` again. The last call wins: an answer to an
 * earlier call arriving late is dropped.
 */
export function useLoad<T>(load: () => Promise<T>, inputs: unknown[]) {
  const [state, setState] = useState<{ data?: T; error?: unknown; loading: boolean }>({
    loading: true,
  });
  const generation = useRef(0);
  const run = () => {
    const mine = ++generation.current;
    setState((previous) => ({ data: previous.data, loading: true }));
    load().then(
      (data) => mine === generation.current && setState({ data, loading: false }),
      (error: unknown) => mine === generation.current && setState({ error, loading: false }),
    );
  };
  useEffect(run, inputs);
  return { ...state, reload: run };
}

/** Runs an action of a form or a button: busy while it runs, its error kept to show. */
export function useAction() {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const run = async (action: () => Promise<void>) => {
    setBusy(true);
    setError(null);
    try {
      await action();
    } catch (caught) {
      setError(caught);
    } finally {
      setBusy(false);
    }
  };
  return { busy, error, run, clear: () => setError(null) };
}

/**
 * A modal dialog (the native <dialog>: focus kept inside, Escape closes it) asking to confirm
 * something that cannot be undone.
 */
export function ConfirmDialog(props: {
  title: string;
  children: ComponentChildren;
  confirm: string;
  onConfirm: () => Promise<void> | void;
  onClose: () => void;
  /** The text to type before the button works (an erasure names the end user). */
  typeToConfirm?: string;
}) {
  const dialog = useRef<HTMLDialogElement>(null);
  const [typed, setTyped] = useState('');
  const action = useAction();
  useEffect(() => {
    dialog.current?.showModal();
  }, []);
  const shown = props.typeToConfirm === undefined ? undefined : visibleId(props.typeToConfirm);
  // The text as it is, or as it is shown (quoted, its unseen spaces written out).
  const ready =
    props.typeToConfirm === undefined || typed === props.typeToConfirm || typed === shown;
  return (
    <dialog ref={dialog} onClose={props.onClose} aria-labelledby="confirm-title">
      <form
        method="dialog"
        onSubmit={(event) => {
          event.preventDefault();
          if (!ready) return;
          void action.run(async () => {
            await props.onConfirm();
            dialog.current?.close();
          });
        }}
      >
        <h2 id="confirm-title">{props.title}</h2>
        {props.children}
        {props.typeToConfirm !== undefined ? (
          <label>
            Type <strong class="id">{shown}</strong> to confirm
            <input
              value={typed}
              onInput={(event) => setTyped(event.currentTarget.value)}
              autoComplete="off"
            />
          </label>
        ) : null}
        <ErrorNotice error={action.error} />
        <div class="actions">
          <button type="button" class="secondary" onClick={() => dialog.current?.close()}>
            Cancel
          </button>
          <button type="submit" class="danger" disabled={!ready || action.busy}>
            {action.busy ? 'Working…' : props.confirm}
          </button>
        </div>
      </form>
    </dialog>
  );
}

/**
 * A secret shown once (an API key, a webhook signing secret): selectable text and a copy button;
 * it is gone when dismissed, and the console keeps no copy.
 */
export function SecretOnce(props: { label: string; secret: string; onDone: () => void }) {
  const [copied, setCopied] = useState<'yes' | 'no' | null>(null);
  const field = useRef<HTMLInputElement>(null);
  return (
    <div class="notice secret" role="region" aria-label={props.label}>
      <p>
        <strong>{props.label}.</strong> Copy it now: it is shown this once and cannot be retrieved
        again.
      </p>
      <div class="secret-row">
        <input
          ref={field}
          readOnly
          value={props.secret}
          aria-label={props.label}
          onFocus={(e) => e.currentTarget.select()}
        />
        <button
          type="button"
          onClick={() => {
            navigator.clipboard.writeText(props.secret).then(
              () => setCopied('yes'),
              () => {
                field.current?.select();
                setCopied('no');
              },
            );
          }}
        >
          Copy
        </button>
      </div>
      <p class="small" role="status">
        {copied === 'yes'
          ? 'Copied to the clipboard.'
          : copied === 'no'
            ? 'Selected: press Ctrl+C (⌘C) to copy.'
            : ''}
      </p>
      <button type="button" class="secondary" onClick={props.onDone}>
        I have stored it
      </button>
    </div>
  );
}

export function PageTitle({ title, children }: { title: string; children?: ComponentChildren }) {
  useEffect(() => {
    document.title = `${title} · Personality API console`;
  }, [title]);
  return (
    <header class="page-header">
      <h1>{title}</h1>
      {children}
    </header>
  );
}

/** "Load more" for a paged list. */
export function More(props: { hasMore: boolean; loading: boolean; onMore: () => void }) {
  if (!props.hasMore) return null;
  return (
    <button type="button" class="secondary" disabled={props.loading} onClick={props.onMore}>
      {props.loading ? 'Loading…' : 'Load more'}
    </button>
  );
}

/**
 * A paged list (`{data, has_more}` with `starting_after`): the first page when the inputs
 * change, then more on demand.
 */
export function usePaged<T>(
  fetchPage: (after: string | undefined) => Promise<{ data: T[]; has_more: boolean }>,
  cursorOf: (item: T) => string,
  inputs: unknown[],
) {
  const [items, setItems] = useState<T[]>([]);
  const [hasMore, setHasMore] = useState(false);
  const [loading, setLoading] = useState(true);
  const [error, setError] = useState<unknown>(null);
  const generation = useRef(0);
  const load = (after: string | undefined, previous: T[]) => {
    const mine = ++generation.current;
    setLoading(true);
    setError(null);
    // A new list (other inputs, or reloaded) shows nothing of the old one while it loads.
    if (after === undefined) setItems([]);
    fetchPage(after).then(
      (page) => {
        if (mine !== generation.current) return;
        setItems([...previous, ...page.data]);
        setHasMore(page.has_more);
        setLoading(false);
      },
      (caught: unknown) => {
        if (mine !== generation.current) return;
        setError(caught);
        setLoading(false);
      },
    );
  };
  useEffect(() => load(undefined, []), inputs);
  return {
    items,
    hasMore,
    loading,
    error,
    more: () => load(items.length > 0 ? cursorOf(items[items.length - 1]) : undefined, items),
    reload: () => load(undefined, []),
    setItems,
  };
}

/**
 * A labelled select. The label names it through `for`, not by wrapping it: a wrapping label's
 * name would take in the options' text.
 */
export function SelectField({
  label,
  children,
  ...select
}: { label: string; children: ComponentChildren } & SelectHTMLAttributes<HTMLSelectElement>) {
  const id = useId();
  return (
    <div class="field">
      <label for={id}>{label}</label>
      <select id={id} {...select}>
        {children}
      </select>
    </div>
  );
}
