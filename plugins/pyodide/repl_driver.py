# REPL driver for the pyodide backend, run with `python -c` inside the guest
# after plugins/internal/pycell (cell.py: how a cell runs; helpers.py: the
# helpers a cell calls, given `call` below as transport; both shared with the
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

    def call(kind, prompts, contexts, has_context, model):
        # helpers.py's transport: the same request the native driver sends,
        # so one host bridge (core/plugin.CallbackFunc) answers both backends.
        counter[0] += 1
        req = {'type': 'callback', 'id': counter[0], 'kind': kind, 'prompts': prompts}
        if contexts is not None:
            req['contexts'], req['has_context'] = contexts, has_context
        if model is not None:
            req['model'] = model
        send(req)
        msg = recv()
        return msg.get('results'), msg.get('error')

    g = {'__name__': '__main__', '__builtins__': __builtins__}
    _rlm_helpers_install(g, call)
    try:
        with open('/rlm/ctx/context', 'rb') as f:
            data = f.read()
        _rlm_helpers_open(json.loads(data) if ctx_kind == 'json' else data.decode('utf-8', 'replace'))
    except FileNotFoundError:
        pass

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
