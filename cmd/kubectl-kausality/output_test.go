package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/alecthomas/kong"
	"github.com/google/go-cmp/cmp"
)

// TestOutputFormats: every command that prints takes -o from the one set
// of format names, and refuses, as it parses and so before any cluster is
// asked, a name it does not print by naming the ones it does.
func TestOutputFormats(t *testing.T) {
	dir := t.TempDir()
	xr := filepath.Join(dir, "xr.yaml")
	if err := os.WriteFile(xr, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	type args struct {
		command []string
		format  string
	}
	type want struct {
		err string
	}
	document := "use one of default, json, yaml"
	trace := []string{"trace", "xnetworks/shop"}
	status := []string{"status"}
	explain := []string{"explain", "xnetworks/shop"}
	plan := []string{"plan", "-f", xr, "--functions", dir}
	cases := map[string]struct {
		reason string
		args   args
		want   want
	}{
		"TraceDefault": {reason: "A tree is a table.", args: args{command: trace, format: "default"}},
		"TraceWide":    {reason: "A tree has columns to add.", args: args{command: trace, format: "wide"}},
		"TraceJSON":    {reason: "A tree is JSON for a script.", args: args{command: trace, format: "json"}},
		"TraceYAML":    {reason: "A tree is YAML for a script.", args: args{command: trace, format: "yaml"}},
		"TraceDot":     {reason: "A tree can be drawn.", args: args{command: trace, format: "dot"}},
		"TraceUnknown": {reason: "A name of no format lists all trace takes.", args: args{command: trace, format: "table"},
			want: want{err: `trace: unknown output format "table": use one of default, wide, json, yaml, dot`}},

		"StatusDefault": {reason: "Status is a table.", args: args{command: status, format: "default"}},
		"StatusJSON":    {reason: "Status is JSON for a script.", args: args{command: status, format: "json"}},
		"StatusYAML":    {reason: "Status is YAML for a script.", args: args{command: status, format: "yaml"}},
		"StatusWide":    {reason: "Status has no columns to add.", args: args{command: status, format: "wide"}, want: want{err: `status: output format "wide" does not apply to this command: ` + document}},
		"StatusDot":     {reason: "Status is no tree.", args: args{command: status, format: "dot"}, want: want{err: `status: output format "dot" does not apply to this command: ` + document}},

		"ExplainDefault": {reason: "An explanation is text.", args: args{command: explain, format: "default"}},
		"ExplainJSON":    {reason: "An explanation is JSON for a script.", args: args{command: explain, format: "json"}},
		"ExplainYAML":    {reason: "An explanation is YAML for a script.", args: args{command: explain, format: "yaml"}},
		"ExplainText":    {reason: "text was explain's default and is no alias.", args: args{command: explain, format: "text"}, want: want{err: `explain: unknown output format "text": ` + document}},
		"ExplainWide":    {reason: "An explanation has no columns.", args: args{command: explain, format: "wide"}, want: want{err: `explain: output format "wide" does not apply to this command: ` + document}},
		"ExplainDot":     {reason: "An explanation is no tree.", args: args{command: explain, format: "dot"}, want: want{err: `explain: output format "dot" does not apply to this command: ` + document}},

		"PlanDefault": {reason: "A plan is text.", args: args{command: plan, format: "default"}},
		"PlanJSON":    {reason: "A plan is JSON for CI.", args: args{command: plan, format: "json"}},
		"PlanYAML":    {reason: "A plan is YAML too.", args: args{command: plan, format: "yaml"}},
		"PlanWide":    {reason: "A plan has no columns.", args: args{command: plan, format: "wide"}, want: want{err: `plan: output format "wide" does not apply to this command: ` + document}},
		"PlanDot":     {reason: "A plan is no tree.", args: args{command: plan, format: "dot"}, want: want{err: `plan: output format "dot" does not apply to this command: ` + document}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := kong.New(&CLI{}, kong.Name("kubectl-kausality"), kong.Exit(func(int) { t.Errorf("%s: kong exited", tc.reason) }))
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if _, err := p.Parse(append(append([]string{}, tc.args.command...), "-o", tc.args.format)); err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tc.want.err, got); diff != "" {
				t.Errorf("%s\nParse(...): -want error, +got error:\n%s", tc.reason, diff)
			}
		})
	}
}
