# REPL driver for the pyodide backend, run with `python -c` inside the guest.
# It talks to the host over /rlm/io/chan (newline-delimited JSON), which it
# opens before any user code runs and which cannot be opened twice. User
# code's stdout/stderr go to the captured streams, never to the channel.
import sys


def _rlm_driver(ctx_kind):
    import os, json, ast, traceback

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

    def call(method, params):
        counter[0] += 1
        send({'type': 'callback', 'id': counter[0], 'method': method, 'params': params})
        msg = recv()
        if msg.get('error'):
            raise RuntimeError('%s failed: %s' % (method, msg['error']))
        return msg.get('result')

    def llm_query(prompt, model=None):
        """Ask the language model one question; returns its answer as a str."""
        return call('llm_query', {'prompt': prompt, 'model': model})

    def llm_query_batched(prompts, model=None):
        """Ask several questions at once; returns the answers in order."""
        return call('llm_query_batched', {'prompts': list(prompts), 'model': model})

    def rlm_query(prompt, model=None):
        """Run a recursive RLM sub-call; returns its final answer."""
        return call('rlm_query', {'prompt': prompt, 'model': model})

    def rlm_query_batched(prompts, model=None):
        """Run several recursive sub-calls; returns their answers in order."""
        return call('rlm_query_batched', {'prompts': list(prompts), 'model': model})

    g = {'__name__': '__main__', '__builtins__': __builtins__,
         'llm_query': llm_query, 'llm_query_batched': llm_query_batched,
         'rlm_query': rlm_query, 'rlm_query_batched': rlm_query_batched}

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
        tree = ast.parse(code, '<cell>', 'exec')
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
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
