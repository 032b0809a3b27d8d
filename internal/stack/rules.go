package stack

import (
	"errors"
	"fmt"
	"slices"
)

// checkRules evaluates the template's Rules for one deployment's parameter
// values, as CloudFormation does before it creates or changes anything
// (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/rules-section-structure.html):
// a rule whose RuleCondition holds (or that has none) must have every
// Assert hold. A failed assertion is an error with its AssertDescription,
// so a local stack refuses the parameters a real deploy would.
func (t *Template) checkRules(params map[string]string) error {
	names := make([]string, 0, len(t.rules))
	for name := range t.rules {
		names = append(names, name)
	}
	slices.Sort(names)
	e := &evaluator{t: t, params: params}
	var errs []error
	for _, name := range names {
		rule := mapOf(t.rules[name])
		if cond, ok := rule["RuleCondition"]; ok {
			on, err := e.boolean(cond)
			if err != nil {
				return fmt.Errorf("rule %s: RuleCondition: %w", name, err)
			}
			if !on {
				continue
			}
		}
		asserts, ok := rule["Assertions"].([]any)
		if !ok || len(asserts) == 0 {
			return fmt.Errorf("rule %s has no Assertions", name)
		}
		for i, a := range asserts {
			ok, err := e.boolean(mapOf(a)["Assert"])
			if err != nil {
				return fmt.Errorf("rule %s: Assertions[%d]: %w", name, i, err)
			}
			if !ok {
				errs = append(errs, fmt.Errorf("rule %s: %v", name, mapOf(a)["AssertDescription"]))
			}
		}
	}
	return errors.Join(errs...)
}
