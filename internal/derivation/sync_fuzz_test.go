package derivation

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

// FuzzParseSubjectList: kausality.io/derive-subjects is text whoever may
// edit a Composition writes, and it becomes a policy's subjects. Parsing
// never panics, and whatever parses writes back to text that parses to the
// same subjects.
func FuzzParseSubjectList(f *testing.F) {
	f.Add("group=platform-team, propagator=crossplane-system/crossplane")
	f.Add("--user=alice@example.com\nservice-account=team-a/deployer,")
	f.Add("user=system:serviceaccount:a:b,group=a=b")
	f.Add("service-account=/x, user= ,=")
	f.Fuzz(func(t *testing.T, s string) {
		subs, err := ParseSubjectList(s)
		if err != nil {
			return
		}
		again, err := ParseSubjectList(formatSubjects(subs))
		if err != nil {
			t.Fatalf("ParseSubjectList(format(ParseSubjectList(%q))): %v", s, err)
		}
		if diff := cmp.Diff(subs, again); diff != "" {
			t.Fatalf("round trip changed the subjects: -first, +second:\n%s", diff)
		}
		for _, sub := range subs {
			if sub.Name == "" || (sub.Kind == v1alpha1.SubjectServiceAccount) != (sub.Namespace != "") {
				t.Fatalf("ParseSubjectList(%q) gave %+v, which names no possible subject", s, sub)
			}
		}
	})
}

// formatSubjects writes subjects in the annotation's syntax.
func formatSubjects(subs []v1alpha1.Subject) string {
	var out []string
	for _, s := range subs {
		switch {
		case s.Kind == v1alpha1.SubjectUser:
			out = append(out, "user="+s.Name)
		case s.Kind == v1alpha1.SubjectGroup:
			out = append(out, "group="+s.Name)
		case s.MayInitiate:
			out = append(out, "service-account="+s.Namespace+"/"+s.Name)
		default:
			out = append(out, "propagator="+s.Namespace+"/"+s.Name)
		}
	}
	return strings.Join(out, ", ")
}
