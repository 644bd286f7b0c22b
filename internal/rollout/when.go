package rollout

import (
	"fmt"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"

	"github.com/kausality-io/kausality-crossplane/internal/memo"
	"github.com/kausality-io/kausality-crossplane/internal/policy"
)

// Variables every propagateWhen expression sees, beside the collections
// and blockers the Input names.
const (
	VarItem = "item"
	VarXR   = "xr"
	VarNow  = "now"
	// VarObject is a blocker's when: the blocker object.
	VarObject = "object"
)

// NewEnv is the environment of propagateWhen expressions: the Kubernetes
// CEL dialect of AllowancePolicy (policy.NewEnv) with the propagation
// library, item, xr, now, and names (collections, blockers) declared.
func NewEnv(names ...string) (*cel.Env, error) {
	opts := []cel.EnvOption{
		Library(),
		cel.Variable(VarItem, cel.DynType),
		cel.Variable(VarXR, cel.DynType),
		cel.Variable(VarNow, cel.TimestampType),
		cel.Variable(VarObject, cel.DynType),
	}
	for _, n := range names {
		opts = append(opts, cel.Variable(n, cel.DynType))
	}
	return policy.NewEnv(opts...)
}

// A Rule is a compiled propagateWhen: expressions that must all be true.
type Rule struct {
	exprs []policy.Expression
	// windows are the maintenance windows each expression names with
	// constant arguments, so a closed one can say when it opens.
	windows [][]Window
}

// Compile compiles exprs in env. An error names the failing expression.
func Compile(env *cel.Env, exprs []string) (Rule, error) {
	var r Rule
	for i, x := range exprs {
		e, err := policy.CompileBool(env, x)
		if err != nil {
			return Rule{}, errors.Wrapf(err, "propagateWhen[%d] %q", i, x)
		}
		ws, err := windowsOf(e.AST())
		if err != nil {
			return Rule{}, errors.Wrapf(err, "propagateWhen[%d] %q", i, x)
		}
		r.exprs = append(r.exprs, e)
		r.windows = append(r.windows, ws)
	}
	return r, nil
}

// Empty reports whether the rule has no expression: it always holds.
func (r Rule) Empty() bool { return len(r.exprs) == 0 }

// A Verdict says whether a rule holds and, when not, why and when it may.
type Verdict struct {
	OK bool
	// Failed is the first expression that is false.
	Failed string
	// Opens is when the earliest closed maintenance window Failed names
	// opens; zero when it names none that is closed.
	Opens time.Time
}

// Check evaluates the rule on vars at now (which vars holds as VarNow).
func (r Rule) Check(vars map[string]any, now time.Time) (Verdict, error) {
	for i, e := range r.exprs {
		ok, err := e.Eval(vars)
		if err != nil {
			return Verdict{Failed: e.String()}, err
		}
		if ok {
			continue
		}
		v := Verdict{Failed: e.String()}
		for _, w := range r.windows[i] {
			if o := w.NextOpen(now); !w.Contains(now) && !o.IsZero() && (v.Opens.IsZero() || o.Before(v.Opens)) {
				v.Opens = o
			}
		}
		return v, nil
	}
	return Verdict{OK: true}, nil
}

// windowsOf reads the windows of the inWindow calls in ast whose spec and
// time zone are constants, and checks them: a typo in a window is a
// compile error, not a roll-out that never starts.
func windowsOf(a *cel.Ast) ([]Window, error) {
	var ws []Window
	var err error
	celast.PostOrderVisit(a.NativeRep().Expr(), celast.NewExprVisitor(func(e celast.Expr) {
		if err != nil || e.Kind() != celast.CallKind || e.AsCall().FunctionName() != fnInWindow {
			return
		}
		args := e.AsCall().Args()
		if len(args) != 3 || args[1].Kind() != celast.LiteralKind || args[2].Kind() != celast.LiteralKind {
			return
		}
		spec, sok := args[1].AsLiteral().(types.String)
		tz, tok := args[2].AsLiteral().(types.String)
		if !sok || !tok {
			return
		}
		var w Window
		if w, err = ParseWindow(string(spec), string(tz)); err == nil {
			ws = append(ws, w)
		}
	}))
	return ws, err
}

const fnInWindow = "inWindow"

// windows caches parsed windows by spec and zone for evaluations whose
// arguments are not constants. It lives with the CEL binding, which has no
// owner to hang it on, and is bounded: arguments read from objects can take
// any number of values.
var windows = memo.New[Window](256)

// inWindow is the CEL binding: inWindow(now, spec, tz).
func inWindow(args ...ref.Val) ref.Val {
	ts, ok := args[0].(types.Timestamp)
	spec, sok := args[1].(types.String)
	tz, tok := args[2].(types.String)
	if !ok || !sok || !tok {
		return types.NewErr("inWindow(now, spec, timeZone) takes a timestamp and two strings")
	}
	w, err := windows.Get(fmt.Sprintf("%s\x00%s", spec, tz), func() (Window, error) { return ParseWindow(string(spec), string(tz)) })
	if err != nil {
		return types.NewErr("%v", err)
	}
	return types.Bool(w.Contains(ts.Time))
}
