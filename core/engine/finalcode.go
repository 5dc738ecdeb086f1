package engine

import (
	"regexp"
)

// Models often finish from inside a code block (`FINAL(answer)` as the
// block's last line, or `FINAL_VAR(result)` after computing it), although
// the system prompt asks for the directive on a line of its own outside the
// block. In a bare REPL that is a NameError, and a model told "name 'FINAL'
// is not defined" tends to try again the same way until its turns run out.
// So the REPL gets FINAL and FINAL_VAR as functions that record the answer,
// and the loop ends with it after the block, as the model meant.
//
// The helpers are defined only before a block that mentions them (one extra
// cell, a few milliseconds, and only then), so runs that never call them
// pay nothing, and a REPL restarted after a timeout gets them again.

// finalCall finds a call of FINAL or FINAL_VAR in code, or a use of the
// answer dict (answer.go).
var finalCall = regexp.MustCompile(`\bFINAL(_VAR)?\s*\(|\banswer\s*(\[|=[^=]|\.update\s*\()`)

// The REPL variables the helpers record the answer in: the kind ("final" or
// "final_var") and the value, read with the session's Variable like a
// FINAL_VAR.
const (
	finalKindVar  = "_rlm_final_kind"
	finalValueVar = "_rlm_final_value"
)

// finalHelpers defines FINAL and FINAL_VAR in the REPL and clears an answer
// an earlier block recorded.
//
// FINAL_VAR accepts what a model writes: a variable's name as a string
// (FINAL_VAR("result")), or the variable itself (FINAL_VAR(result), which
// Python evaluates to its value before the call). A string naming no
// variable is an error telling the model how to fix it, not the answer: a
// typo must not pass for one.
const finalHelpers = `def FINAL(answer):
    """End the run with answer (str as is, anything else as JSON)."""
    global ` + finalKindVar + `, ` + finalValueVar + `
    ` + finalValueVar + ` = answer
    ` + finalKindVar + ` = "final"
    return answer

def FINAL_VAR(name):
    """End the run with the value of the REPL variable name."""
    global ` + finalKindVar + `, ` + finalValueVar + `
    g = globals()
    if isinstance(name, str) and name.isidentifier() and name in g:
        value = g[name]
    elif any(v is name for k, v in g.items() if not k.startswith("_")):
        value = name
    elif isinstance(name, str) and name.isidentifier():
        raise NameError("FINAL_VAR(%r): the REPL has no variable named %s. Set it first, then call FINAL_VAR(%r) again, or FINAL(answer) with the answer itself." % (name, name, name))
    else:
        value = name
    ` + finalValueVar + ` = value
    ` + finalKindVar + ` = "final_var"
    return value

globals().pop("` + finalKindVar + `", None)
globals().pop("` + finalValueVar + `", None)
` + answerHelpers + `
if "_rlm_helpers_hide" in globals():
    _rlm_helpers_hide(["FINAL", "FINAL_VAR"])
`

// callsFinal reports whether a block may call FINAL or FINAL_VAR, or set
// the answer dict.
func callsFinal(code string) bool { return finalCall.MatchString(code) }

// prepareFinal defines the helpers before a block that calls them.
func (n *node) prepareFinal() error {
	_, err := n.sess.Execute(n.ctx, finalHelpers, n.r.o.CellLimits.Wall)
	if err != nil {
		if n.ctx.Err() != nil {
			return n.ctx.Err()
		}
		return &failure{kind: ErrSandbox, msg: "defining FINAL and FINAL_VAR in the REPL", err: err}
	}
	return nil
}

// finalFromCode returns the answer a block recorded with FINAL or
// FINAL_VAR, and its source; ok is false when it recorded none.
func (n *node) finalFromCode() (answer, source string, ok bool, err error) {
	if _, err := n.sess.Execute(n.ctx, answerCheck, n.r.o.CellLimits.Wall); err != nil {
		if n.ctx.Err() != nil {
			return "", "", false, n.ctx.Err()
		}
		return "", "", false, &failure{kind: ErrSandbox, msg: "reading the answer dict in the REPL", err: err}
	}
	kind, found, err := n.variable(finalKindVar)
	if err != nil || !found {
		return "", "", false, err
	}
	val, found, err := n.variable(finalValueVar)
	if err != nil || !found {
		return "", "", false, err
	}
	source = SourceFinal
	switch kind {
	case "final_var":
		source = SourceFinalVar
	case "answer":
		source = SourceAnswer
	}
	return val, source, true, nil
}
