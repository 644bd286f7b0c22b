package policy

import (
	"sync"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"k8s.io/apimachinery/pkg/util/version"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

// Variables CEL expressions see.
const (
	varObject    = "object"
	varOldObject = "oldObject"
)

// CostLimit bounds the runtime cost of one CEL evaluation, as the API
// server bounds a ValidatingAdmissionPolicy expression.
const CostLimit = celconfig.PerCallLimit

// MaxExpressionBytes bounds the length of one CEL expression, so a huge
// policy cannot stall compilation.
const MaxExpressionBytes = 10 << 10

// DefaultInitializingWhen is the initializing.when of a policy that sets
// none: the object has not been reconciled yet. crossplane-runtime v2 writes
// the observed generation on the Synced condition rather than at
// status.observedGeneration, so both are read.
const DefaultInitializingWhen = "!has(object.status.observedGeneration) && " +
	"!(has(object.status.conditions) && object.status.conditions.exists(c, c.type == 'Synced' && has(c.observedGeneration)))"

var (
	envOnce sync.Once
	env     *cel.Env
	envErr  error
)

// celEnv is the Kubernetes CEL environment (the libraries and language
// settings ValidatingAdmissionPolicy uses for stored expressions) with
// object and oldObject declared.
func celEnv() (*cel.Env, error) {
	envOnce.Do(func() {
		env, envErr = NewEnv(cel.Variable(varObject, cel.DynType), cel.Variable(varOldObject, cel.DynType))
	})
	return env, envErr
}

// NewEnv is the Kubernetes CEL environment every Kausality expression is
// written in (the libraries and language settings ValidatingAdmissionPolicy
// uses for stored expressions), extended by opts: AllowancePolicy rules and
// propagateWhen alike, so policy authors write one dialect.
func NewEnv(opts ...cel.EnvOption) (*cel.Env, error) {
	base := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())
	set, err := base.Extend(environment.VersionedOptions{IntroducedVersion: version.MajorMinor(1, 0), EnvOptions: opts})
	if err != nil {
		return nil, errors.Wrap(err, "cannot build CEL environment")
	}
	e, err := set.Env(environment.StoredExpressions)
	return e, errors.Wrap(err, "cannot build CEL environment")
}

// program is a compiled boolean CEL expression.
type program = Expression

// Expression is a compiled boolean CEL expression, bounded by CostLimit at
// runtime and MaxExpressionBytes at compile time.
type Expression struct {
	expr string
	ast  *cel.Ast
	prg  cel.Program
}

// compileBool compiles a CEL expression that must yield a bool.
func compileBool(expr string) (program, error) {
	e, err := celEnv()
	if err != nil {
		return program{}, err
	}
	return CompileBool(e, expr)
}

// CompileBool compiles expr in e (see NewEnv); it must yield a bool.
func CompileBool(e *cel.Env, expr string) (Expression, error) {
	if len(expr) > MaxExpressionBytes {
		return Expression{}, errors.Errorf("expression is %d bytes, more than the limit of %d", len(expr), MaxExpressionBytes)
	}
	ast, iss := e.Compile(expr)
	if iss.Err() != nil {
		return Expression{}, errors.New(iss.Err().Error())
	}
	if ast.OutputType() != cel.BoolType && ast.OutputType() != cel.DynType {
		return Expression{}, errors.Errorf("expression yields %s, want bool", ast.OutputType())
	}
	prg, err := e.Program(ast, cel.CostLimit(CostLimit), cel.InterruptCheckFrequency(100))
	if err != nil {
		return Expression{}, errors.Wrap(err, "cannot plan expression")
	}
	return Expression{expr: expr, ast: ast, prg: prg}, nil
}

// String is the expression's source.
func (p Expression) String() string { return p.expr }

// AST is the checked expression, for callers that read its constants.
func (p Expression) AST() *cel.Ast { return p.ast }

// Eval runs the expression on the variables vars.
func (p Expression) Eval(vars map[string]any) (bool, error) {
	return p.eval(vars)
}

// vars are the variables of one evaluation: object and oldObject as CEL
// sees them. Building them once per request, not once per expression,
// keeps admission cheap when several policies and rules apply.
type vars map[string]any

// varsOf are the variables for object and oldObject (nil on create).
func varsOf(object, oldObject map[string]any) vars {
	v := vars{varObject: CELView(object), varOldObject: nil}
	if oldObject != nil {
		v[varOldObject] = CELView(oldObject)
	}
	return v
}

// withoutOld is v with oldObject unset, sharing object's view.
func (v vars) withoutOld() vars {
	return vars{varObject: v[varObject], varOldObject: nil}
}

// eval runs the program on the variables.
func (p program) eval(v vars) (bool, error) {
	out, _, err := p.prg.Eval(map[string]any(v))
	if err != nil {
		return false, errors.Wrapf(err, "cannot evaluate %q", p.expr)
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, errors.Errorf("expression %q yielded %s, want bool", p.expr, out.Type())
	}
	return bool(b), nil
}

// CELView is obj with metadata.annotations, metadata.labels and status
// present, so expressions need not guard against their absence. obj is not
// modified.
func CELView(obj map[string]any) map[string]any {
	out := make(map[string]any, len(obj)+2)
	for k, v := range obj {
		out[k] = v
	}
	md, _ := obj["metadata"].(map[string]any)
	m := make(map[string]any, len(md)+2)
	for k, v := range md {
		m[k] = v
	}
	for _, k := range []string{"annotations", "labels"} {
		if _, ok := m[k].(map[string]any); !ok {
			m[k] = map[string]any{}
		}
	}
	out["metadata"] = m
	if _, ok := out["status"].(map[string]any); !ok {
		out["status"] = map[string]any{}
	}
	return out
}
