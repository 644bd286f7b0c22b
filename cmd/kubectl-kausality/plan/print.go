package plan

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/kausality-io/kausality-crossplane/cmd/kubectl-kausality/printer"
	"github.com/kausality-io/kausality-crossplane/internal/preview"
)

// formats are the -o values plan takes: a plan is text with no columns to
// add and no tree to draw.
var formats = []printer.Format{printer.FormatDefault, printer.FormatJSON, printer.FormatYAML}

// Print writes the plan in format: as text (a diff per composed resource)
// or as the plan's stable JSON form, in JSON or YAML.
func Print(w io.Writer, p preview.Plan, format printer.Format) error {
	pr, err := printer.New(format, formats...)
	if err != nil {
		return err
	}
	return pr.Print(w, document{p})
}

// document is a Plan as the printers take it. It embeds the Plan so that
// its JSON and YAML are the Plan's own.
type document struct {
	preview.Plan
}

// WriteText writes the plan as a diff per composed resource; it has no
// wide form.
func (d document) WriteText(w io.Writer, _ bool) error {
	p := d.Plan
	var b strings.Builder
	printAdmission(&b, "admission", p.Admission)
	if c := p.Admission.Composite; c != nil {
		printAdmission(&b, "admission of the XR (when Crossplane syncs the Claim)", *c)
	}
	if x := p.Composite; x != nil {
		fmt.Fprintf(&b, "\n%s %s\n", x.Kind, x.Name)
		if x.Withheld != "" {
			fmt.Fprintf(&b, "  withheld: %s\n", x.Withheld)
		}
		if x.Propagation != "" {
			fmt.Fprintf(&b, "  propagation: %s\n", x.Propagation)
		}
	}
	for _, r := range p.Resources {
		printResource(&b, r)
	}
	s := p.Summary
	fmt.Fprintf(&b, "\n%d change(s) reach the cloud, %d withheld, %d held", s.Reaches, s.Withheld, s.Held)
	if s.Denied {
		b.WriteString("; the change is denied")
	}
	b.WriteString("\n")
	for _, n := range p.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	_, err := io.WriteString(w, b.String())
	return errors.Wrap(err, "cannot write the plan")
}

func printAdmission(b *strings.Builder, what string, a preview.AdmissionPlan) {
	if a.Allowed {
		fmt.Fprintf(b, "%s: allowed\n", what)
	} else {
		fmt.Fprintf(b, "%s: DENIED: %s\n", what, a.Message)
	}
	for _, w := range a.Warnings {
		fmt.Fprintf(b, "  warning: %s\n", w)
	}
	for _, x := range a.New {
		fmt.Fprintf(b, "  + allowance %s\n", preview.Describe(x))
	}
	for _, x := range a.Kept {
		fmt.Fprintf(b, "    allowance %s\n", preview.Describe(x))
	}
}

// marks are the diff markers of each outcome.
var marks = map[preview.Outcome]string{preview.Reaches: "~", preview.Withheld: "!", preview.Held: "…"}

func printResource(b *strings.Builder, r preview.Resource) {
	name := r.Name
	if name == "" {
		name = "(new)"
	}
	fmt.Fprintf(b, "\n%s %s %s/%s", r.Action, r.Resource, r.Kind, name)
	if r.Gated {
		fmt.Fprintf(b, "  gate [%s]", strings.Join(r.Gate, ", "))
	} else {
		b.WriteString("  not gated")
	}
	b.WriteString("\n")
	for _, a := range r.Open {
		fmt.Fprintf(b, "    open %s\n", a)
	}
	for _, a := range r.Pending {
		fmt.Fprintf(b, "    pending %s\n", a)
	}
	for _, c := range r.Changes {
		what := c.Verb
		if c.Path != "" {
			what = fmt.Sprintf("%s: %s -> %s", c.Path, value(c.From), value(c.To))
		}
		fmt.Fprintf(b, "  %s %s  %s: %s\n", marks[c.Outcome], what, strings.ToLower(string(c.Outcome)), c.Reason)
	}
}

func value(v any) string {
	if v == nil {
		return "(none)"
	}
	j, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(j)
}
