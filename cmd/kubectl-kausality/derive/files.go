package derive

import (
	"bufio"
	"bytes"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	xpv1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/kausality-io/kausality-crossplane/apis/v1alpha1"
)

// ReadObjects reads every object of a YAML or JSON file, multi-document
// files included; "-" is stdin.
func ReadObjects(path string) ([]*unstructured.Unstructured, error) {
	var r io.Reader
	if path == "-" {
		r = os.Stdin
	} else {
		f, err := os.Open(filepath.Clean(path))
		if err != nil {
			return nil, errors.Wrapf(err, "cannot open %s", path)
		}
		defer f.Close() //nolint:errcheck // read only
		r = f
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bufio.NewReader(r), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, errors.Wrapf(err, "cannot read %s", path)
		}
		if len(u.Object) == 0 {
			continue
		}
		if u.IsList() {
			l, err := u.ToList()
			if err != nil {
				return nil, errors.Wrapf(err, "cannot read the list in %s", path)
			}
			for i := range l.Items {
				out = append(out, &l.Items[i])
			}
			continue
		}
		out = append(out, u)
	}
}

// readDir reads the objects of every YAML and JSON file below dir.
func readDir(dir string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch strings.ToLower(filepath.Ext(path)) {
		case ".yaml", ".yml", ".json":
		default:
			return nil
		}
		if d.IsDir() {
			return nil
		}
		objs, err := ReadObjects(path)
		out = append(out, objs...)
		return err
	})
	return out, errors.Wrapf(err, "cannot read %s", dir)
}

// Compositions are the Compositions among objs.
func Compositions(objs []*unstructured.Unstructured) ([]*xpv1.Composition, error) {
	var out []*xpv1.Composition
	for _, u := range objs {
		if u.GetKind() != "Composition" || !strings.HasPrefix(u.GetAPIVersion(), "apiextensions.crossplane.io/") {
			continue
		}
		c := &xpv1.Composition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, c); err != nil {
			return nil, errors.Wrapf(err, "cannot read Composition %s", u.GetName())
		}
		out = append(out, c)
	}
	return out, nil
}

// Policies are the AllowancePolicies among objs.
func Policies(objs []*unstructured.Unstructured) ([]v1alpha1.AllowancePolicy, error) {
	var out []v1alpha1.AllowancePolicy
	for _, u := range objs {
		if u.GetKind() != "AllowancePolicy" || u.GetAPIVersion() != v1alpha1.SchemeGroupVersion.String() {
			continue
		}
		var p v1alpha1.AllowancePolicy
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &p); err != nil {
			return nil, errors.Wrapf(err, "cannot read AllowancePolicy %s", u.GetName())
		}
		out = append(out, p)
	}
	return out, nil
}

// joinDocuments joins YAML documents with the separator.
func joinDocuments(docs [][]byte) []byte {
	return bytes.Join(docs, []byte("---\n"))
}
