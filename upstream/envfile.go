package upstream

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"

	"github.com/mcpflow/mcpflow/internal/inputfile"
)

// maxEnvFile bounds a dotenv file.
const maxEnvFile = 1 << 20

// readEnvFile reads a dotenv file: NAME=VALUE lines; blank lines and lines
// starting with # are skipped; "export " before a name is allowed; a value
// in double quotes may hold \n, \t, \" and \\, one in single quotes is
// taken as written; an unquoted value ends at " #". Nothing is expanded.
func readEnvFile(path string) (map[string]string, error) {
	b, err := inputfile.Read(path, maxEnvFile)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), maxEnvFile)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		name, value, ok := strings.Cut(line, "=")
		name = strings.TrimSpace(name)
		if !ok || !validVarName(name) {
			return nil, fmt.Errorf("%s:%d: expected NAME=VALUE", path, n)
		}
		value = strings.TrimSpace(value)
		switch {
		case len(value) >= 2 && value[0] == '"' && value[len(value)-1] == '"':
			value = strings.NewReplacer(`\n`, "\n", `\t`, "\t", `\"`, `"`, `\\`, `\`).Replace(value[1 : len(value)-1])
		case len(value) >= 2 && value[0] == '\'' && value[len(value)-1] == '\'':
			value = value[1 : len(value)-1]
		default:
			if i := strings.Index(value, " #"); i >= 0 {
				value = strings.TrimSpace(value[:i])
			}
		}
		out[name] = value
	}
	return out, sc.Err()
}
