# REPL driver for the pyodide backend, run with `python -c` inside the guest
# after plugins/internal/pycell/cell.py (how a cell runs, shared with the
# native driver). It talks to the host over /rlm/io/chan (newline-delimited
# JSON), which it opens before any user code runs and which cannot be opened
# twice. User code's stdout/stderr go to the captured streams, never to the
# channel.
import sys


def _rlm_driver(ctx_kind):
    import os, json

    os.chdir('/app')
    sys.path[0:1] = ['/app', '/app/site-packages']
    ch = open('/rlm/io/chan', 'r+b', buffering=0)
    inbuf = bytearray()
    counter = [0]

    def send(obj):
        data = (json.dumps(obj) + '\n').encode()
        view = memoryview(data)
        while view:
            n = ch.write(view)
            view = view[n:]

    def recv():
        while True:
            i = inbuf.find(b'\n')
            if i >= 0:
                line = bytes(inbuf[:i])
                del inbuf[:i + 1]
                return json.loads(line)
            chunk = ch.read(1 << 20)
            if not chunk:
                raise SystemExit(0)
            inbuf.extend(chunk)

    class LLMQueryError(RuntimeError):
        """A model query made through llm_query / rlm_query failed."""

    def call(kind, prompts, contexts=None, has_context=None, model=None):
        # The same request the native driver sends, so one host bridge
        # (core/plugin.CallbackFunc) answers both backends.
        counter[0] += 1
        req = {'type': 'callback', 'id': counter[0], 'kind': kind, 'prompts': prompts}
        if contexts is not None:
            req['contexts'], req['has_context'] = contexts, has_context
        if model is not None:
            req['model'] = model
        send(req)
        msg = recv()
        if msg.get('error'):
            raise LLMQueryError('%s failed: %s' % (kind, msg['error']))
        results = msg.get('results') or []
        if len(results) != len(prompts):
            raise LLMQueryError('%s: expected %d results, got %d' % (kind, len(prompts), len(results)))
        return results

    def as_text(x, what):
        if isinstance(x, str):
            return x
        if isinstance(x, (bytes, bytearray)):
            return bytes(x).decode('utf-8', 'replace')
        raise TypeError('%s must be a str, not %s' % (what, type(x).__name__))

    def ctx_text(c):
        if isinstance(c, (str, bytes, bytearray)):
            return as_text(c, 'ctx')
        try:
            return json.dumps(c, ensure_ascii=False)
        except (TypeError, ValueError):
            return repr(c)

    def model_name(model):
        return None if model is None else as_text(model, 'model')

    def llm_query(prompt, model=None):
        """Ask the language model one question; returns its answer as a str."""
        return call('llm_query', [as_text(prompt, 'prompt')], model=model_name(model))[0]

    def llm_query_batched(prompts, model=None):
        """Ask several questions in one round trip (the host runs them
        concurrently); returns the answers in order."""
        prompts = [as_text(p, 'prompt') for p in prompts]
        if not prompts:
            return []
        return call('llm_query', prompts, model=model_name(model))

    def sub_contexts(ctxs):
        # A ctx of None means the session's context: sent only when the
        # cell rebound `context` (the host already has the original).
        cur = g.get('context')
        texts, has = [], []
        for c in ctxs:
            if c is None and cur is not opened_context[0]:
                c = cur
            has.append(c is not None)
            texts.append(ctx_text(c) if c is not None else '')
        return texts, has

    def rlm_query(task, ctx=None):
        """Run a recursive RLM sub-task. ctx defaults to the current `context`."""
        texts, has = sub_contexts([ctx])
        return call('rlm_query', [as_text(task, 'task')], texts, has)[0]

    def rlm_query_batched(tasks, ctxs=None):
        """Run several sub-tasks in one round trip; ctxs, when given, has one
        entry per task (None: the current `context`)."""
        tasks = [as_text(t, 'task') for t in tasks]
        if not tasks:
            return []
        ctxs = [None] * len(tasks) if ctxs is None else list(ctxs)
        if len(ctxs) != len(tasks):
            raise ValueError('rlm_query_batched: %d tasks but %d contexts' % (len(tasks), len(ctxs)))
        texts, has = sub_contexts(ctxs)
        return call('rlm_query', tasks, texts, has)

    def chunk_text(text, size=2000, overlap=200):
        """Split text into chunks of size characters, each sharing overlap
        characters with the previous one."""
        if not isinstance(size, int) or size <= 0:
            raise ValueError('chunk_text: size must be a positive integer')
        if not isinstance(overlap, int) or not 0 <= overlap < size:
            raise ValueError('chunk_text: overlap must satisfy 0 <= overlap < size')
        out, i, step = [], 0, size - overlap
        while i < len(text):
            out.append(text[i:i + size])
            if i + size >= len(text):
                break
            i += step
        return out

    def search_context(pattern, window=200, flags=0, max_results=None):
        """Regex search over context; returns dicts with match, start, end,
        snippet (window characters either side) and snippet_start."""
        import re
        c = g.get('context')
        text = '' if c is None else c if isinstance(c, str) else json.dumps(c)
        out = []
        for m in re.finditer(pattern, text, flags):
            lo = max(0, m.start() - window)
            out.append({'match': m.group(0), 'start': m.start(), 'end': m.end(),
                        'snippet': text[lo:m.end() + window], 'snippet_start': lo})
            if max_results is not None and len(out) >= max_results:
                break
        return out

    g = {'__name__': '__main__', '__builtins__': __builtins__,
         'llm_query': llm_query, 'llm_query_batched': llm_query_batched,
         'rlm_query': rlm_query, 'rlm_query_batched': rlm_query_batched,
         'chunk_text': chunk_text, 'search_context': search_context,
         'LLMQueryError': LLMQueryError}

    def SHOW_VARS():
        """Names and types of the variables defined so far."""
        return {k: type(v).__name__ for k, v in g.items()
                if k not in reserved and not k.startswith('_')}

    g['SHOW_VARS'] = SHOW_VARS
    try:
        with open('/rlm/ctx/context', 'rb') as f:
            data = f.read()
        g['context'] = json.loads(data) if ctx_kind == 'json' else data.decode('utf-8', 'replace')
    except FileNotFoundError:
        g['context'] = None
    opened_context = [g['context']]
    reserved = set(g) - {'context'}

    own = sys._getframe().f_code.co_filename  # the driver's frames: '<string>'

    send({'type': 'ready'})
    while True:
        msg = recv()
        op = msg.get('op')
        if op == 'exec':
            value = error = None
            try:
                # cell.py: runs the cell, returns the repr of a final expression
                value = _rlm_cell_run(msg['code'], '<cell>', g, msg.get('max_value', 1 << 20))
            except BaseException as e:  # SystemExit and KeyboardInterrupt too: the loop must survive
                import traceback
                tb = e.__traceback__
                while tb is not None and tb.tb_frame.f_code.co_filename == own:
                    tb = tb.tb_next
                if isinstance(e, SyntaxError):
                    tb = None
                if isinstance(e, SystemExit):
                    if e.code not in (None, 0):
                        error = 'SystemExit: %s' % (e.code,)
                else:
                    traceback.print_exception(type(e), e, tb)
                    error = ''.join(traceback.format_exception_only(type(e), e)).strip()
            send({'type': 'result', 'id': msg['id'], 'value': value, 'error': error})
        elif op == 'get':
            name = msg.get('name')
            if name not in g:
                send({'type': 'result', 'id': msg['id'], 'found': False,
                      'error': 'NameError: name %r is not defined' % (name,)})
                continue
            v = g[name]
            try:
                js = json.dumps(v)
            except (TypeError, ValueError):
                js = None
            send({'type': 'result', 'id': msg['id'], 'value': repr(v), 'json': js})
        elif op == 'close':
            return


_rlm_driver(sys.argv[1] if len(sys.argv) > 1 else 'text')
