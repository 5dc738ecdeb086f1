# REPL driver for the pyodide backend, run with `python -c` inside the guest.
# It talks to the host over /rlm/io/chan (newline-delimited JSON), which it
# opens before any user code runs and which cannot be opened twice. User
# code's stdout/stderr go to the captured streams, never to the channel.
import sys


def _rlm_driver(ctx_kind):
    import os, json, _ast

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

    def call(method, params):
        counter[0] += 1
        send({'type': 'callback', 'id': counter[0], 'method': method, 'params': params})
        msg = recv()
        if msg.get('error'):
            raise LLMQueryError('%s failed: %s' % (method, msg['error']))
        return msg.get('result')

    def llm_query(prompt, model=None):
        """Ask the language model one question; returns its answer as a str."""
        return call('llm_query', {'prompt': prompt, 'model': model})

    def llm_query_batched(prompts, model=None):
        """Ask several questions at once; returns the answers in order."""
        return call('llm_query_batched', {'prompts': list(prompts), 'model': model})

    def rlm_query(task, ctx=None):
        """Run a recursive RLM sub-task; ctx defaults to the session's context
        (which is then not sent back: the host already has it)."""
        params = {'prompt': task}
        if ctx is not None:
            params['context'] = ctx if isinstance(ctx, str) else json.dumps(ctx)
        return call('rlm_query', params)

    def rlm_query_batched(tasks, ctxs=None):
        """Run several recursive sub-tasks; returns their answers in order."""
        tasks = list(tasks)
        params = {'prompts': tasks}
        if ctxs is not None:
            ctxs = list(ctxs)
            if len(ctxs) != len(tasks):
                raise ValueError('rlm_query_batched: %d tasks but %d contexts' % (len(tasks), len(ctxs)))
            params['contexts'] = [c if c is None or isinstance(c, str) else json.dumps(c) for c in ctxs]
        return call('rlm_query_batched', params)

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
    reserved = set(g) - {'context'}

    def run_cell(code):
        # The C-level _ast, not the ast module: importing ast (and enum with
        # it) would add start-up time to every session.
        tree = compile(code, '<cell>', 'exec', _ast.PyCF_ONLY_AST)
        last = None
        if tree.body and isinstance(tree.body[-1], _ast.Expr):
            last = _ast.Expression(tree.body.pop().value)
        exec(compile(tree, '<cell>', 'exec'), g)
        if last is not None:
            v = eval(compile(last, '<cell>', 'eval'), g)
            if v is not None:
                return repr(v)
        return None

    send({'type': 'ready'})
    while True:
        msg = recv()
        op = msg.get('op')
        if op == 'exec':
            value = error = None
            try:
                value = run_cell(msg['code'])
            except BaseException as e:  # SystemExit and KeyboardInterrupt too: the loop must survive
                import traceback
                tb = e.__traceback__
                tb = tb.tb_next.tb_next if tb is not None and tb.tb_next is not None else None
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
                send({'type': 'result', 'id': msg['id'], 'error': 'NameError: name %r is not defined' % (name,)})
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
