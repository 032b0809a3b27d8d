package cli

import (
	"fmt"
	"os"

	"github.com/urldownloader/urldownloader/shared/domain/params"
)

// ApplyHostRulesFile puts the rules of the --host-rules file into the
// parameters as HostRules, as an SSM parameter would hold them, checked
// now so a mistake is reported with the file's name before any work. It
// refuses a file together with --param HostRules: one of them would be
// silently ignored.
func ApplyHostRulesFile(p ParamFlags, path string) error {
	if path == "" {
		return nil
	}
	if _, set := p[params.NameHostRules]; set {
		return fmt.Errorf("--host-rules %s and --param %s both set the rules; give one", path, params.NameHostRules)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--host-rules: %w", err)
	}
	if _, err := params.ParseHostRules(string(b)); err != nil {
		return fmt.Errorf("--host-rules %s: %w", path, err)
	}
	p[params.NameHostRules] = string(b)
	return nil
}
