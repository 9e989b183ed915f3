package server

import (
	"html/template"
	"strings"
	"testing"
)

// homeTemplate is the home page as an html/template over homePage's own
// fixed parts, the reference its escaping is held to: html/template
// escapes each field for where it sits, homePage by hand.
var homeTemplate = template.Must(template.New("home").Parse(homeHead + `{{.Version}}` + homeGates +
	`{{range .Gates}}<li><strong>{{.Name}}</strong>: {{.What}}</li>{{else}}` + homeNoGate + `{{end}}` + homeMore +
	`{{if .Console}}` + homeConsole + `{{end}}` + homeTail))

// TestHomePageAsTemplate: homePage writes, byte for byte, what
// homeTemplate writes, with text that needs escaping in every field.
func TestHomePageAsTemplate(t *testing.T) {
	tricky := "v1.2.3+dirty <b>&amp;</b> \"quoted\" 'single' \x00nul é"
	for _, c := range []struct {
		version string
		gates   []gateLine
		console bool
	}{
		{"-", nil, false},
		{"v1.0.0", []gateLine{{"keys", gateWhat["keys"]}, {"shim", gateWhat["shim"]}}, true},
		{tricky, []gateLine{{tricky, tricky}}, false},
	} {
		var want, got strings.Builder
		if err := homeTemplate.Execute(&want, map[string]any{"Version": c.version, "Gates": c.gates, "Console": c.console}); err != nil {
			t.Fatal(err)
		}
		if err := homePage(&got, c.version, c.gates, c.console); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Errorf("homePage(%q, %v, %v) differs from the template:\n got %q\nwant %q", c.version, c.gates, c.console, got.String(), want.String())
		}
	}
}
