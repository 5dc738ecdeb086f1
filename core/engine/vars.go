package engine

// bindVarsCode binds each key of a dict `context` as a REPL variable of its
// own: the named inputs of `rlm run --var NAME=FILE`, which make `context`
// their dict. The values are the dict's own objects, not copies.
const bindVarsCode = `if isinstance(context, dict):
    for _rlm_k, _rlm_v in context.items():
        if isinstance(_rlm_k, str) and _rlm_k.isidentifier():
            globals()[_rlm_k] = _rlm_v
    del _rlm_k, _rlm_v
`

// bindVars runs bindVarsCode in the root loop's REPL (Options.BindContextVars).
func (n *node) bindVars() error {
	if !n.r.o.BindContextVars || n.depth != 0 {
		return nil
	}
	if _, err := n.sess.Execute(n.ctx, bindVarsCode, 0); err != nil {
		if n.ctx.Err() != nil {
			return n.ctx.Err()
		}
		return &failure{kind: ErrSandbox, msg: "binding the named inputs in the REPL", err: err}
	}
	return nil
}
