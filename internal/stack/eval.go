package stack

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/urldownloader/urldownloader/internal/moto"
)

// noValue is what {"Ref": "AWS::NoValue"} evaluates to: the property or
// list element holding it is removed, as CloudFormation does.
type noValue struct{}

// physical is a created resource as intrinsic functions see it: what Ref
// returns, and its Fn::GetAtt attributes.
type physical struct {
	Type  string
	Ref   string
	Attrs map[string]string
}

// evaluator resolves CloudFormation intrinsic functions against parameter
// values, conditions and the resources created so far.
type evaluator struct {
	t         *Template
	params    map[string]string
	created   map[string]physical
	stackName string

	conds    map[string]bool
	visiting map[string]bool
}

// eval returns v with every intrinsic function replaced by its value.
func (e *evaluator) eval(v any) (any, error) {
	switch x := v.(type) {
	case []any:
		out := make([]any, 0, len(x))
		for i, el := range x {
			r, err := e.eval(el)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			if _, drop := r.(noValue); !drop {
				out = append(out, r)
			}
		}
		return out, nil
	case map[string]any:
		if len(x) == 1 {
			for k, arg := range x {
				if k == "Ref" || k == "Condition" || strings.HasPrefix(k, "Fn::") {
					r, err := e.intrinsic(k, arg)
					if err != nil {
						return nil, fmt.Errorf("%s: %w", k, err)
					}
					return r, nil
				}
			}
		}
		out := make(map[string]any, len(x))
		for k, el := range x {
			r, err := e.eval(el)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			if _, drop := r.(noValue); !drop {
				out[k] = r
			}
		}
		return out, nil
	default:
		return v, nil
	}
}

// str evaluates v and renders the result as a string.
func (e *evaluator) str(v any) (string, error) {
	r, err := e.eval(v)
	if err != nil {
		return "", err
	}
	switch r.(type) {
	case map[string]any, []any, noValue, nil:
		return "", fmt.Errorf("want a string, got %v", r)
	}
	return scalar(r), nil
}

func (e *evaluator) intrinsic(fn string, arg any) (any, error) {
	switch fn {
	case "Ref":
		name, ok := arg.(string)
		if !ok {
			return nil, fmt.Errorf("want a name, got %v", arg)
		}
		return e.ref(name)
	case "Condition":
		name, ok := arg.(string)
		if !ok {
			return nil, fmt.Errorf("want a condition name, got %v", arg)
		}
		return e.condition(name)
	case "Fn::GetAtt":
		var res, attr string
		switch a := arg.(type) {
		case string:
			res, attr, _ = strings.Cut(a, ".")
		case []any:
			if len(a) == 2 {
				res, _ = a[0].(string)
				var err error
				if attr, err = e.str(a[1]); err != nil {
					return nil, err
				}
			}
		}
		if res == "" || attr == "" {
			return nil, fmt.Errorf("want [Resource, Attribute], got %v", arg)
		}
		return e.getAtt(res, attr)
	case "Fn::Sub":
		return e.sub(arg)
	case "Fn::If":
		a, ok := arg.([]any)
		if !ok || len(a) != 3 {
			return nil, fmt.Errorf("want [Condition, ValueIfTrue, ValueIfFalse], got %v", arg)
		}
		name, _ := a[0].(string)
		c, err := e.condition(name)
		if err != nil {
			return nil, err
		}
		if c {
			return e.eval(a[1])
		}
		return e.eval(a[2])
	case "Fn::Equals":
		a, ok := arg.([]any)
		if !ok || len(a) != 2 {
			return nil, fmt.Errorf("want [Value1, Value2], got %v", arg)
		}
		x, err := e.str(a[0])
		if err != nil {
			return nil, err
		}
		y, err := e.str(a[1])
		if err != nil {
			return nil, err
		}
		return x == y, nil
	case "Fn::And", "Fn::Or":
		a, ok := arg.([]any)
		if !ok || len(a) < 2 || len(a) > 10 {
			return nil, fmt.Errorf("want 2 to 10 conditions, got %v", arg)
		}
		and := fn == "Fn::And"
		for _, c := range a {
			b, err := e.boolean(c)
			if err != nil {
				return nil, err
			}
			if b != and {
				return b, nil
			}
		}
		return and, nil
	case "Fn::Not":
		a, ok := arg.([]any)
		if !ok || len(a) != 1 {
			return nil, fmt.Errorf("want [Condition], got %v", arg)
		}
		b, err := e.boolean(a[0])
		return !b, err
	case "Fn::Contains":
		// A rule function: whether the list holds the string.
		a, ok := arg.([]any)
		if !ok || len(a) != 2 {
			return nil, fmt.Errorf("want [[Values], Value], got %v", arg)
		}
		list, err := e.eval(a[0])
		if err != nil {
			return nil, err
		}
		items, ok := list.([]any)
		if !ok {
			return nil, fmt.Errorf("want a list of values, got %v", list)
		}
		v, err := e.str(a[1])
		if err != nil {
			return nil, err
		}
		return slices.ContainsFunc(items, func(it any) bool { return scalar(it) == v }), nil
	case "Fn::FindInMap":
		a, ok := arg.([]any)
		if !ok || len(a) != 3 {
			return nil, fmt.Errorf("want [MapName, TopLevelKey, SecondLevelKey], got %v", arg)
		}
		var keys [3]string
		for i, k := range a {
			s, err := e.str(k)
			if err != nil {
				return nil, err
			}
			keys[i] = s
		}
		m, ok := e.t.mappings[keys[0]]
		if !ok {
			return nil, fmt.Errorf("no mapping %s", keys[0])
		}
		top, ok := mapOf(m)[keys[1]]
		if !ok {
			return nil, fmt.Errorf("mapping %s has no key %q", keys[0], keys[1])
		}
		v, ok := mapOf(top)[keys[2]]
		if !ok {
			return nil, fmt.Errorf("mapping %s.%s has no key %q", keys[0], keys[1], keys[2])
		}
		return v, nil
	case "Fn::Join":
		a, ok := arg.([]any)
		if !ok || len(a) != 2 {
			return nil, fmt.Errorf("want [Delimiter, [Values]], got %v", arg)
		}
		list, err := e.eval(a[1])
		if err != nil {
			return nil, err
		}
		items, ok := list.([]any)
		if !ok {
			return nil, fmt.Errorf("want a list of values, got %v", list)
		}
		parts := make([]string, len(items))
		for i, it := range items {
			parts[i] = scalar(it)
		}
		return strings.Join(parts, scalar(a[0])), nil
	case "Fn::Select":
		a, ok := arg.([]any)
		if !ok || len(a) != 2 {
			return nil, fmt.Errorf("want [Index, [Values]], got %v", arg)
		}
		idx, err := e.str(a[0])
		if err != nil {
			return nil, err
		}
		list, err := e.eval(a[1])
		if err != nil {
			return nil, err
		}
		items, _ := list.([]any)
		i, err := strconv.Atoi(idx)
		if err != nil || i < 0 || i >= len(items) {
			return nil, fmt.Errorf("index %q out of range of %d values", idx, len(items))
		}
		return items[i], nil
	case "Fn::Split":
		a, ok := arg.([]any)
		if !ok || len(a) != 2 {
			return nil, fmt.Errorf("want [Delimiter, Value], got %v", arg)
		}
		s, err := e.str(a[1])
		if err != nil {
			return nil, err
		}
		var out []any
		for _, p := range strings.Split(s, scalar(a[0])) {
			out = append(out, p)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%s is not supported locally: teach internal/stack", fn)
}

func (e *evaluator) boolean(v any) (bool, error) {
	r, err := e.eval(v)
	if err != nil {
		return false, err
	}
	b, ok := r.(bool)
	if !ok {
		return false, fmt.Errorf("want a condition, got %v", r)
	}
	return b, nil
}

// condition evaluates a named condition once; a cycle is an error.
func (e *evaluator) condition(name string) (bool, error) {
	if b, ok := e.conds[name]; ok {
		return b, nil
	}
	def, ok := e.t.conditions[name]
	if !ok {
		return false, fmt.Errorf("no condition %s", name)
	}
	if e.visiting[name] {
		return false, fmt.Errorf("condition %s refers to itself", name)
	}
	if e.visiting == nil {
		e.visiting = map[string]bool{}
		e.conds = map[string]bool{}
	}
	e.visiting[name] = true
	defer delete(e.visiting, name)
	b, err := e.boolean(def)
	if err != nil {
		return false, fmt.Errorf("condition %s: %w", name, err)
	}
	e.conds[name] = b
	return b, nil
}

// pseudo are the values of CloudFormation's pseudo parameters locally.
func (e *evaluator) pseudo(name string) (string, bool) {
	switch name {
	case "AWS::Region":
		return moto.Region, true
	case "AWS::AccountId":
		return moto.AccountID, true
	case "AWS::Partition":
		return "aws", true
	case "AWS::URLSuffix":
		return "amazonaws.com", true
	case "AWS::StackName":
		return e.stackName, true
	case "AWS::StackId":
		return fmt.Sprintf("arn:aws:cloudformation:%s:%s:stack/%s/local", moto.Region, moto.AccountID, e.stackName), true
	}
	return "", false
}

func (e *evaluator) ref(name string) (any, error) {
	if name == "AWS::NoValue" {
		return noValue{}, nil
	}
	if v, ok := e.pseudo(name); ok {
		return v, nil
	}
	if v, ok := e.params[name]; ok {
		return v, nil
	}
	if p, ok := e.created[name]; ok {
		return p.Ref, nil
	}
	if r, ok := e.t.resources[name]; ok {
		return nil, fmt.Errorf("resource %s (%s) is not created locally", name, r.Type)
	}
	return nil, fmt.Errorf("no parameter or resource %s", name)
}

func (e *evaluator) getAtt(res, attr string) (string, error) {
	p, ok := e.created[res]
	if !ok {
		if r, ok := e.t.resources[res]; ok {
			return "", fmt.Errorf("resource %s (%s) is not created locally", res, r.Type)
		}
		return "", fmt.Errorf("no resource %s", res)
	}
	v, ok := p.Attrs[attr]
	if !ok {
		return "", fmt.Errorf("%s (%s) has no attribute %s locally", res, p.Type, attr)
	}
	return v, nil
}

var subVar = regexp.MustCompile(`\$\{([^}]*)\}`)

// sub implements Fn::Sub: "${Name}" is a parameter, pseudo parameter or
// resource Ref, "${Resource.Attr}" a GetAtt, "${!Text}" a literal "${Text}",
// and the optional second argument maps extra names to values.
func (e *evaluator) sub(arg any) (any, error) {
	var tmpl string
	vars := map[string]string{}
	switch a := arg.(type) {
	case string:
		tmpl = a
	case []any:
		if len(a) != 2 {
			return nil, fmt.Errorf("want String or [String, {Var: Value}], got %v", arg)
		}
		tmpl, _ = a[0].(string)
		for k, v := range mapOf(a[1]) {
			s, err := e.str(v)
			if err != nil {
				return nil, fmt.Errorf("variable %s: %w", k, err)
			}
			vars[k] = s
		}
	default:
		return nil, fmt.Errorf("want String or [String, {Var: Value}], got %v", arg)
	}
	var errs []error
	out := subVar.ReplaceAllStringFunc(tmpl, func(m string) string {
		name := m[2 : len(m)-1]
		if strings.HasPrefix(name, "!") {
			return "${" + name[1:] + "}"
		}
		if v, ok := vars[name]; ok {
			return v
		}
		if res, attr, ok := strings.Cut(name, "."); ok && !strings.HasPrefix(name, "AWS::") {
			v, err := e.getAtt(res, attr)
			errs = append(errs, err)
			return v
		}
		v, err := e.ref(name)
		if err != nil {
			errs = append(errs, err)
			return ""
		}
		return scalar(v)
	})
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%q: %w", tmpl, err)
	}
	return out, nil
}

// refs lists the resources that v refers to (Ref, Fn::GetAtt, ${...} in
// Fn::Sub), for ordering creation.
func (t *Template) refs(v any) []string {
	var out []string
	add := func(name string) {
		if _, ok := t.resources[name]; ok && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case []any:
			for _, el := range x {
				walk(el)
			}
		case map[string]any:
			for k, el := range x {
				switch k {
				case "Ref":
					if s, ok := el.(string); ok {
						add(s)
					}
				case "Fn::GetAtt":
					switch a := el.(type) {
					case string:
						res, _, _ := strings.Cut(a, ".")
						add(res)
					case []any:
						if len(a) > 0 {
							add(fmt.Sprint(a[0]))
						}
					}
				case "Fn::Sub":
					s, _ := el.(string)
					if a, ok := el.([]any); ok && len(a) > 0 {
						s, _ = a[0].(string)
						walk(a[1:])
					}
					for _, m := range subVar.FindAllStringSubmatch(s, -1) {
						res, _, _ := strings.Cut(m[1], ".")
						add(res)
					}
				}
				walk(el)
			}
		}
	}
	walk(v)
	return out
}
