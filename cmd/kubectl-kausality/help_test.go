package main

import (
	"reflect"
	"strings"
	"testing"
)

// TestEveryCommandHasExamples: each leaf command tells what it is for and
// shows how it is called, in kong's detailed help.
func TestEveryCommandHasExamples(t *testing.T) {
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if _, ok := f.Tag.Lookup("cmd"); !ok {
				continue
			}
			name := path + " " + strings.ToLower(f.Name)
			cmd := v.Field(i).Addr().Interface()
			if _, runs := reflect.TypeOf(cmd).MethodByName("Run"); !runs {
				walk(v.Field(i), name)
				continue
			}
			h, ok := cmd.(interface{ Help() string })
			if !ok {
				t.Errorf("kubectl kausality%s has no Help", name)
				continue
			}
			if help := h.Help(); !strings.Contains(help, "Examples:") || !strings.Contains(help, "kubectl kausality"+name) {
				t.Errorf("kubectl kausality%s: Help has no example of itself:\n%s", name, help)
			}
		}
	}
	walk(reflect.ValueOf(&CLI{}).Elem(), "")
}
