package printer

import (
	"bytes"
	"io"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/test"
	"github.com/google/go-cmp/cmp"
)

// text is a Value with a text and a wide text of its own.
type text struct {
	Name string `json:"name"`
}

func (v text) WriteText(w io.Writer, wide bool) error {
	s := v.Name + "\n"
	if wide {
		s = v.Name + "  wide\n"
	}
	_, err := io.WriteString(w, s)
	return err
}

// graph is a text that can be drawn too.
type graph struct{ text }

func (v graph) WriteDot(w io.Writer) error {
	_, err := io.WriteString(w, "digraph { "+v.Name+" }\n")
	return err
}

// unencodable is a Value encoding/json refuses.
type unencodable struct {
	text
	C chan int `json:"c"`
}

// failing is a Writer that refuses every write.
type failing struct{}

var errBoom = errors.New("boom")

func (failing) Write([]byte) (int, error) { return 0, errBoom }

func TestNew(t *testing.T) {
	all := []Format{FormatDefault, FormatWide, FormatJSON, FormatYAML, FormatDot}
	document := []Format{FormatDefault, FormatJSON, FormatYAML}
	type args struct {
		format   Format
		accepted []Format
	}
	type want struct {
		p   Printer
		err error
	}
	cases := map[string]struct {
		reason string
		args   args
		want   want
	}{
		"Empty": {
			reason: "No -o is the default.",
			args:   args{format: "", accepted: document},
			want:   want{p: DefaultPrinter{}},
		},
		"Default": {
			reason: "The default is the text a person reads.",
			args:   args{format: FormatDefault, accepted: all},
			want:   want{p: DefaultPrinter{}},
		},
		"Wide": {
			reason: "Wide is its own printer.",
			args:   args{format: FormatWide, accepted: all},
			want:   want{p: WidePrinter{}},
		},
		"JSON": {
			reason: "JSON is its own printer.",
			args:   args{format: FormatJSON, accepted: document},
			want:   want{p: JSONPrinter{}},
		},
		"YAML": {
			reason: "YAML is its own printer.",
			args:   args{format: FormatYAML, accepted: document},
			want:   want{p: YAMLPrinter{}},
		},
		"Dot": {
			reason: "Dot is its own printer.",
			args:   args{format: FormatDot, accepted: all},
			want:   want{p: DotPrinter{}},
		},
		"Unknown": {
			reason: "A name no command takes is refused with the ones this command takes.",
			args:   args{format: "table", accepted: document},
			want:   want{err: errors.Errorf(errFmtUnknownFormat, "table", "default, json, yaml")},
		},
		"TextIsGone": {
			reason: "explain's former text is the default now; the old name is no alias.",
			args:   args{format: "text", accepted: document},
			want:   want{err: errors.New(`unknown output format "text": use one of default, json, yaml`)},
		},
		"NotAccepted": {
			reason: "A format of the contract the command does not print is refused with the ones it does.",
			args:   args{format: FormatDot, accepted: document},
			want:   want{err: errors.New(`output format "dot" does not apply to this command: use one of default, json, yaml`)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := New(tc.args.format, tc.args.accepted...)
			if diff := cmp.Diff(tc.want.err, err, test.EquateErrors()); diff != "" {
				t.Errorf("%s\nNew(...): -want error, +got error:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.p, p); diff != "" {
				t.Errorf("%s\nNew(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestPrint(t *testing.T) {
	type args struct {
		p Printer
		v Value
		w io.Writer
	}
	type want struct {
		out string
		err error
	}
	cases := map[string]struct {
		reason string
		args   args
		want   want
	}{
		"Default": {
			reason: "The default printer writes the value's text.",
			args:   args{p: DefaultPrinter{}, v: text{Name: "shop"}},
			want:   want{out: "shop\n"},
		},
		"Wide": {
			reason: "The wide printer asks for the wide text.",
			args:   args{p: WidePrinter{}, v: text{Name: "shop"}},
			want:   want{out: "shop  wide\n"},
		},
		"JSON": {
			reason: "JSON is the value's fields, indented, ending in a newline.",
			args:   args{p: JSONPrinter{}, v: text{Name: "shop"}},
			want:   want{out: "{\n  \"name\": \"shop\"\n}\n"},
		},
		"YAML": {
			reason: "YAML has the JSON form's keys.",
			args:   args{p: YAMLPrinter{}, v: text{Name: "shop"}},
			want:   want{out: "name: shop\n"},
		},
		"Dot": {
			reason: "Dot draws a graph.",
			args:   args{p: DotPrinter{}, v: graph{text{Name: "shop"}}},
			want:   want{out: "digraph { shop }\n"},
		},
		"DotNoGraph": {
			reason: "Dot refuses a value that is no graph.",
			args:   args{p: DotPrinter{}, v: text{Name: "shop"}},
			want:   want{err: errors.New(errNotGraph)},
		},
		"JSONUnencodable": {
			reason: "A value JSON cannot encode is named as such.",
			args:   args{p: JSONPrinter{}, v: unencodable{}},
			want:   want{err: errors.Wrap(errors.New("json: unsupported type: chan int"), errEncodeJSON)},
		},
		"YAMLUnencodable": {
			reason: "A value YAML cannot encode is named as such.",
			args:   args{p: YAMLPrinter{}, v: unencodable{}},
			want:   want{err: errors.Wrap(errors.New("error marshaling into JSON: json: unsupported type: chan int"), errEncodeYAML)},
		},
		"JSONWriteFails": {
			reason: "A failed write says it was the output's.",
			args:   args{p: JSONPrinter{}, v: text{Name: "shop"}, w: failing{}},
			want:   want{err: errors.Wrap(errBoom, errWrite)},
		},
		"YAMLWriteFails": {
			reason: "A failed write says it was the output's.",
			args:   args{p: YAMLPrinter{}, v: text{Name: "shop"}, w: failing{}},
			want:   want{err: errors.Wrap(errBoom, errWrite)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			w := tc.args.w
			if w == nil {
				w = &out
			}
			err := tc.args.p.Print(w, tc.args.v)
			if diff := cmp.Diff(tc.want.err, err, test.EquateErrors()); diff != "" {
				t.Errorf("%s\nPrint(...): -want error, +got error:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.out, out.String()); diff != "" {
				t.Errorf("%s\nPrint(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
