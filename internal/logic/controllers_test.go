package logic

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestBuildHash(t *testing.T) {
	a := BuildHash([]string{"xpkg.crossplane.io/crossplane/crossplane:v2.1.0"})
	if len(a) != buildHashLen {
		t.Fatalf("BuildHash is %q, want %d hex digits", a, buildHashLen)
	}
	if b := BuildHash([]string{"xpkg.crossplane.io/crossplane/crossplane:v2.1.1"}); b == a {
		t.Errorf("a new version hashes as the old one: %s", a)
	}
	x := BuildHash([]string{"a:v1", "b:v2"})
	if y := BuildHash([]string{"b:v2", "a:v1", "a:v1"}); x != y {
		t.Errorf("order or repetition of images changed the hash: %s, %s", x, y)
	}
	if y := BuildHash([]string{"a:v1b:v2"}); x == y {
		t.Errorf("images run together hash as two: %s", x)
	}
}

func TestControllersWrote(t *testing.T) {
	const xp, prov = "system:serviceaccount:crossplane-system:crossplane", "system:serviceaccount:crossplane-system:provider-nop"
	cases := map[string]struct {
		rec    Controllers
		sa, b  string
		want   Controllers
		change *Change
	}{
		"FirstWriteIsNoChange": {sa: xp, b: "aaa", want: Controllers{xp: "aaa"}},
		"SameBuild":            {rec: Controllers{xp: "aaa"}, sa: xp, b: "aaa", want: Controllers{xp: "aaa"}},
		"NewBuild": {rec: Controllers{xp: "aaa", prov: "ppp"}, sa: xp, b: "bbb",
			want: Controllers{xp: "bbb", prov: "ppp"}, change: &Change{Controller: xp, From: "aaa", To: "bbb"}},
		"OtherControllersFirstWrite": {rec: Controllers{xp: "aaa"}, sa: prov, b: "ppp", want: Controllers{xp: "aaa", prov: "ppp"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			before := tc.rec.Format()
			got, change := tc.rec.Wrote(tc.sa, tc.b)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("record (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.change, change); diff != "" {
				t.Errorf("change (-want +got):\n%s", diff)
			}
			if tc.rec.Format() != before {
				t.Errorf("Wrote changed the record it was called on")
			}
		})
	}
	c := Change{Controller: xp, From: "aaa", To: "bbb"}
	if got := Describe([]Change{c}); !strings.Contains(got, xp) || !strings.Contains(got, "aaa → bbb") {
		t.Errorf("Describe(%+v) = %q, want the service account and both builds", c, got)
	}
}

func TestParseControllers(t *testing.T) {
	rec := Controllers{"system:serviceaccount:crossplane-system:crossplane": "0123456789ab"}
	got, err := ParseControllers(rec.Format())
	if err != nil || !cmp.Equal(got, rec) {
		t.Fatalf("ParseControllers(Format(%v)) = %v, %v", rec, got, err)
	}
	if got, err := ParseControllers(" "); err != nil || got != nil {
		t.Errorf("blank: %v, %v; want no record", got, err)
	}
	for _, bad := range []string{`[]`, `{"a":1}`, `{"":"x"}`, `{"a":""}`, `{"a":"x"`, `{"a":"` + strings.Repeat("x", MaxControllersBytes) + `"}`} {
		if _, err := ParseControllers(bad); err == nil {
			t.Errorf("ParseControllers(%.40s): want an error", bad)
		}
	}
}

// FuzzParseControllers: the record is protected, but a parser of annotation
// text never panics, and what it accepts formats back to the same record.
func FuzzParseControllers(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"system:serviceaccount:a:b":"0123"}`, `{"a":1}`, `[`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseControllers(s)
		if err != nil {
			return
		}
		back, err := ParseControllers(m.Format())
		if err != nil {
			t.Fatalf("ParseControllers(Format(%v)): %v", m, err)
		}
		if len(m) > 0 && !cmp.Equal(m, back) {
			t.Fatalf("round trip: %v became %v", m, back)
		}
	})
}
