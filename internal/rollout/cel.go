package rollout

import (
	"maps"
	"sync"
	"unsafe"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
)

// KeyState is the key under which a collection member carries what
// Kausality knows of it: whether it applied the change (updated) and is
// Ready. updated() and ready() read it.
const KeyState = "kausality"

// Member is obj as a collection member in CEL: a shallow copy of the
// object with its state under KeyState. id identifies it within its
// collection (the composition resource name: a resource not created yet
// has no metadata.name); empty, its namespace and name do.
func Member(obj map[string]any, id string, updated, ready bool) map[string]any {
	m := maps.Clone(obj)
	if m == nil {
		m = map[string]any{}
	}
	m[KeyState] = map[string]any{"updated": updated, "ready": ready, "id": id}
	return m
}

// Library declares the propagation functions for a CEL environment:
//
//	exponentiallyUpdated(item, collection) bool
//	linearlyUpdated(item, collection, n) bool
//	member.updated() bool
//	member.ready() bool
//	inWindow(now, "Mon-Fri 09:00-17:00", "Europe/Berlin") bool
//
// item must be a member of collection (matched by its id, see Member, else
// by equality); collection is in roll-out order. The batch functions count
// the members that are updated() and ready(): a batch that applied its
// change but is not healthy halts the roll-out (DESIGN §6).
func Library() cel.EnvOption { return cel.Lib(library{}) }

type library struct{}

func (library) CompileOptions() []cel.EnvOption {
	members := cel.ListType(cel.DynType)
	return []cel.EnvOption{
		cel.Function("exponentiallyUpdated",
			cel.Overload("exponentiallyUpdated_dyn_list", []*cel.Type{cel.DynType, members}, cel.BoolType,
				cel.BinaryBinding(func(item, collection ref.Val) ref.Val {
					i, u, err := position(item, collection)
					if err != nil {
						return err
					}
					return types.Bool(Exponential(i, u))
				}))),
		cel.Function("linearlyUpdated",
			cel.Overload("linearlyUpdated_dyn_list_int", []*cel.Type{cel.DynType, members, cel.IntType}, cel.BoolType,
				cel.FunctionBinding(func(args ...ref.Val) ref.Val {
					i, u, err := position(args[0], args[1])
					if err != nil {
						return err
					}
					n, ok := args[2].(types.Int)
					if !ok || n < 1 {
						return types.NewErr("linearlyUpdated: the batch size must be at least 1, not %v", args[2])
					}
					return types.Bool(Linear(i, u, int(n)))
				}))),
		cel.Function(fnInWindow,
			cel.Overload("inWindow_timestamp_string_string", []*cel.Type{cel.TimestampType, cel.StringType, cel.StringType}, cel.BoolType,
				cel.FunctionBinding(inWindow))),
		cel.Function("updated",
			cel.MemberOverload("dyn_updated", []*cel.Type{cel.DynType}, cel.BoolType,
				cel.UnaryBinding(func(m ref.Val) ref.Val { return state(m, "updated") }))),
		cel.Function("ready",
			cel.MemberOverload("dyn_ready", []*cel.Type{cel.DynType}, cel.BoolType,
				cel.UnaryBinding(func(m ref.Val) ref.Val { return state(m, "ready") }))),
	}
}

func (library) ProgramOptions() []cel.ProgramOption { return nil }

// state reads the member's flag named f (see Member).
func state(m ref.Val, f string) ref.Val {
	mm, ok := m.(traits.Mapper)
	if !ok {
		return types.NewErr("%s() applies to a collection member, not %s", f, m.Type().TypeName())
	}
	s, found := mm.Find(types.String(KeyState))
	if !found {
		return types.NewErr("%s(): the object is no collection member (it has no %s)", f, KeyState)
	}
	sm, ok := s.(traits.Mapper)
	if !ok {
		return types.NewErr("%s(): %s is not a map", f, KeyState)
	}
	v, found := sm.Find(types.String(f))
	if b, ok := v.(types.Bool); found && ok {
		return b
	}
	return types.False
}

// position is item's index in collection and how many members are
// updated and ready.
func position(item, collection ref.Val) (int, int, ref.Val) {
	// The function passes members as Member builds them: read those
	// natively, or every call would wrap each member of the collection as
	// a CEL map, O(n²) over a roll-out.
	if ms, ok := collection.Value().([]any); ok {
		if it, ok := item.Value().(map[string]any); ok {
			if i, u, ok := nativePosition(it, ms); ok {
				return i, u, nil
			}
		}
	}
	l, ok := collection.(traits.Lister)
	if !ok {
		return 0, 0, types.NewErr("the collection must be a list, not %s", collection.Type().TypeName())
	}
	index, updated := -1, 0
	id := identity(item)
	i := 0
	for it := l.Iterator(); it.HasNext() == types.True; i++ {
		m := it.Next()
		if index < 0 && ((id != "" && identity(m) == id) || (id == "" && m.Equal(item) == types.True)) {
			index = i
		}
		if state(m, "updated") == types.True && state(m, "ready") == types.True {
			updated++
		}
	}
	if index < 0 {
		return 0, 0, types.NewErr("the item is not a member of the collection")
	}
	return index, updated, nil
}

// identity is a member's id (see Member), else its namespace/name, ""
// without either.
func identity(v ref.Val) string {
	m, ok := v.(traits.Mapper)
	if !ok {
		return ""
	}
	if s, found := m.Find(types.String(KeyState)); found {
		if sm, ok := s.(traits.Mapper); ok {
			if id, found := sm.Find(types.String("id")); found {
				if ids, ok := id.(types.String); ok && ids != "" {
					return "id:" + string(ids)
				}
			}
		}
	}
	md, found := m.Find(types.String("metadata"))
	if !found {
		return ""
	}
	mdm, ok := md.(traits.Mapper)
	if !ok {
		return ""
	}
	name, _ := mdm.Find(types.String("name"))
	ns, _ := mdm.Find(types.String("namespace"))
	n, _ := name.(types.String)
	if n == "" {
		return ""
	}
	s, _ := ns.(types.String)
	return string(s) + "/" + string(n)
}

// indexedFrom is the size from which a collection's positions are worked
// out once and kept (indexed): below it, a walk costs less.
const indexedFrom = 64

// indexed is the last large collection whose positions were worked out:
// the provider evaluates a roll-out's rule for every composite of a fleet
// over the same collection, which would otherwise cost a walk of the
// fleet per composite. It holds the collection, so no other slice can
// reuse its backing array while it is kept; collections are never changed
// in place once built.
var indexed struct {
	sync.Mutex
	members []any
	index   map[string]int
	updated int
}

// nativePosition is position over members as Member builds them; ok is
// false when one is not such a member or item is not found.
func nativePosition(item map[string]any, members []any) (index, updated int, ok bool) {
	id, _ := nativeState(item)["id"].(string)
	if id == "" {
		return 0, 0, false
	}
	if len(members) >= indexedFrom {
		return indexedPosition(id, members)
	}
	return walkPosition(id, members)
}

// indexedPosition is nativePosition through indexed.
func indexedPosition(id string, members []any) (int, int, bool) {
	indexed.Lock()
	defer indexed.Unlock()
	if len(indexed.members) != len(members) || unsafe.SliceData(indexed.members) != unsafe.SliceData(members) {
		index := make(map[string]int, len(members))
		updated := 0
		for i, v := range members {
			m, isMap := v.(map[string]any)
			st := nativeState(m)
			if !isMap || st == nil {
				return 0, 0, false
			}
			if mid, _ := st["id"].(string); mid != "" {
				if _, dup := index[mid]; !dup {
					index[mid] = i
				}
			}
			if st["updated"] == true && st["ready"] == true {
				updated++
			}
		}
		indexed.members, indexed.index, indexed.updated = members, index, updated
	}
	i, ok := indexed.index[id]
	return i, indexed.updated, ok
}

// walkPosition is nativePosition by walking members.
func walkPosition(id string, members []any) (index, updated int, ok bool) {
	index = -1
	for i, v := range members {
		m, isMap := v.(map[string]any)
		st := nativeState(m)
		if !isMap || st == nil {
			return 0, 0, false
		}
		if index < 0 && st["id"] == id {
			index = i
		}
		if st["updated"] == true && st["ready"] == true {
			updated++
		}
	}
	return index, updated, index >= 0
}

func nativeState(m map[string]any) map[string]any {
	st, _ := m[KeyState].(map[string]any)
	return st
}
