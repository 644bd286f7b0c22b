package admission

import (
	"encoding/json"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/kausality-io/kausality-crossplane/internal/mutation"
)

// FuzzDiffPatch: the patch a webhook answers with turns the request's
// object into exactly the object the handler made, whatever the two hold
// (keys with / and ~, empty keys, nested maps, lists, numbers, nulls),
// applied by the API server's own JSON patch library (json-patch v5 gets
// pointers through empty keys wrong).
func FuzzDiffPatch(f *testing.F) {
	f.Add(`{"metadata":{"annotations":{"a/b":"1"}},"spec":{"x":[1,2]}}`, `{"metadata":{"annotations":{"a/b":"2","c~d":"3"}},"spec":{"x":[1]}}`)
	f.Add(`{"a":{"b":{"c":1}},"d":null}`, `{"a":{"b":{}},"e":true}`)
	f.Add(`{"a":1}`, `{"a":{"b":1.5}}`)
	f.Add(`{"a":{"b":1}}`, `{"a":"b"}`)
	f.Add(`{}`, `{}`)
	f.Fuzz(func(t *testing.T, wasJSON, isJSON string) {
		var was, is map[string]any
		if utiljson.Unmarshal([]byte(wasJSON), &was) != nil || utiljson.Unmarshal([]byte(isJSON), &is) != nil || was == nil || is == nil {
			return
		}
		ops := diffPatch(was, is)
		raw, err := json.Marshal(ops)
		if err != nil {
			t.Fatal(err)
		}
		p, err := jsonpatch.DecodePatch(raw)
		if err != nil {
			t.Fatalf("patch %s does not decode: %v", raw, err)
		}
		// The API server applies the patch to its own encoding of the
		// object, which never repeats a key as fuzzed text can.
		sent, err := json.Marshal(was)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := p.Apply(sent)
		if err != nil {
			t.Fatalf("patch %s does not apply to %s: %v", raw, sent, err)
		}
		var got map[string]any
		if err := utiljson.Unmarshal(doc, &got); err != nil {
			t.Fatal(err)
		}
		if !mutation.Equal(got, is) {
			t.Fatalf("patch %s turns %s into %s, want %s", raw, sent, doc, isJSON)
		}
	})
}
