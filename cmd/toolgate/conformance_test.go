package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway/backend"
	"github.com/toolgate/toolgate/internal/testenv"
)

// The official MCP conformance suite (npm @modelcontextprotocol/conformance,
// pinned in examples/servers/package.json) has server scenarios, which it runs
// as a client against a URL, and client scenarios, which start a test server
// of their own and run a client command against it. TestConformance runs both
// against toolgate: the server ones against `serve --http`, the client ones
// with toolgate as the client of one backend, the suite's test server.
//
// Every scenario the suite lists is in one of the two tables below: a
// scenario that applies must pass (no check FAILURE; a WARNING is logged), one
// that does not says why (the README's "MCP conformance suite" says the same).
// A new version of the suite with scenarios these tables lack fails the test
// until each is placed.

// conformanceServerApplies are the server scenarios that test what toolgate's
// front does. server-sse-multiple-streams and server-sse-polling pass with a
// warning: the front is stateless (no session ID) and answers in JSON, which
// the suite says leaves their stream checks out.
var conformanceServerApplies = []string{
	"server-initialize", "logging-set-level", "ping", "tools-list",
	"dns-rebinding-protection", "server-sse-multiple-streams", "server-sse-polling",
}

const (
	naOwnTools  = "calls a test tool of the suite's own (test_simple_text …) on the server: toolgate serves two tools, search_tools and execute_tool, and answers -32602 unknown tool, naming them"
	naResources = "toolgate declares no resources capability (go-sdk answers resources/list with an empty list, so resources-list passes without testing toolgate)"
	naPrompts   = "toolgate declares no prompts capability (go-sdk answers prompts/list with an empty list, so prompts-list passes without testing toolgate)"
	naOldAuth   = "a server of the 2025-03-26 authorization spec publishes no protected-resource metadata (RFC 9728): toolgate logs in to servers of 2025-06-18 and later, and auth login says so"
	naExtension = "an authorization extension (machine-to-machine, enterprise-managed): toolgate's login is a user's approval in a browser"
)

// conformanceServerNotApplicable are the other server scenarios, with why.
var conformanceServerNotApplicable = map[string]string{
	"completion-complete":           "toolgate declares no completions capability (it has no prompts or resource templates to complete) and answers -32601",
	"tools-call-simple-text":        naOwnTools,
	"tools-call-image":              naOwnTools,
	"tools-call-audio":              naOwnTools,
	"tools-call-embedded-resource":  naOwnTools,
	"tools-call-mixed-content":      naOwnTools,
	"tools-call-with-logging":       naOwnTools,
	"tools-call-error":              naOwnTools,
	"tools-call-with-progress":      naOwnTools,
	"tools-call-sampling":           naOwnTools,
	"tools-call-elicitation":        naOwnTools,
	"elicitation-sep1034-defaults":  naOwnTools,
	"elicitation-sep1330-enums":     naOwnTools,
	"json-schema-2020-12":           naOwnTools,
	"resources-list":                naResources,
	"resources-read-text":           naResources,
	"resources-read-binary":         naResources,
	"resources-templates-read":      naResources,
	"resources-subscribe":           naResources,
	"resources-unsubscribe":         naResources,
	"prompts-list":                  naPrompts,
	"prompts-get-simple":            naPrompts,
	"prompts-get-with-args":         naPrompts,
	"prompts-get-embedded-resource": naPrompts,
	"prompts-get-with-image":        naPrompts,
}

// conformanceClientApplies are the client scenarios that test toolgate as a
// client, with the backend tool the driver calls through execute_tool (""
// calls none: connecting is the test). auth/basic-cimd passes with a warning:
// toolgate registers itself (RFC 7591) where the authorization server also
// takes a client ID metadata document, which a gateway on a user's machine has
// no https URL to publish. auth/scope-step-up passes with the operator's step
// that the 403 names: the login command it quotes, run as it is (the gateway
// recorded the scopes the server asked for, which the login asks for).
var conformanceClientApplies = map[string]string{
	"initialize":                        "",
	"tools_call":                        "add_numbers",
	"sse-retry":                         "test_reconnection",
	"auth/metadata-default":             "test-tool",
	"auth/metadata-var1":                "test-tool",
	"auth/metadata-var2":                "test-tool",
	"auth/metadata-var3":                "test-tool",
	"auth/basic-cimd":                   "test-tool",
	"auth/scope-from-www-authenticate":  "test-tool",
	"auth/scope-from-scopes-supported":  "test-tool",
	"auth/scope-omitted-when-undefined": "test-tool",
	"auth/scope-step-up":                "test-tool",
	"auth/scope-retry-limit":            "test-tool",
	"auth/token-endpoint-auth-basic":    "test-tool",
	"auth/token-endpoint-auth-post":     "test-tool",
	"auth/token-endpoint-auth-none":     "test-tool",
	"auth/pre-registration":             "test-tool",
	"auth/resource-mismatch":            "test-tool",
	"auth/offline-access-scope":         "test-tool",
	"auth/offline-access-not-supported": "test-tool",
}

// conformanceMustSucceed are checks whose WARNING (a SHOULD of the spec)
// fails the scenario all the same: the step-up login must ask for the
// scopes the 403 named with those the login had.
var conformanceMustSucceed = map[string]string{
	"auth/scope-step-up": "scope-step-up-escalation",
}

// conformanceClientNotApplicable are the other client scenarios, with why.
var conformanceClientNotApplicable = map[string]string{
	"elicitation-sep1034-client-defaults":       "a backend of protocol 2025-11-25 asks on its own session, which every client's calls share: toolgate declares no elicitation capability there and answers -32602 client does not support elicitation (README: Questions a backend asks)",
	"auth/2025-03-26-oauth-metadata-backcompat": naOldAuth,
	"auth/2025-03-26-oauth-endpoint-fallback":   naOldAuth,
	"auth/client-credentials-jwt":               naExtension,
	"auth/client-credentials-basic":             naExtension,
	"auth/cross-app-access-complete-flow":       naExtension,
}

// envConformanceClient makes the test binary the conformance suite's client
// command (conformanceClientMain) instead of a test run.
const envConformanceClient = "TOOLGATE_CONFORMANCE_CLIENT"

// conformanceSuite returns node, the suite's entry point and the hook
// (testdata/conformance/node20.mjs) that lets it load on Node.js 20.
func conformanceSuite(t *testing.T) (node, suite, hook string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.Missing(t, "node not found in PATH: install Node.js 20 or newer")
	}
	suite = filepath.Join(repoRoot(t), "examples", "servers", "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")
	if _, err := os.Stat(suite); err != nil {
		testenv.Missing(t, "the MCP conformance suite is not installed in examples/servers/node_modules (make deps-servers)")
	}
	hook, err = filepath.Abs(filepath.Join("testdata", "conformance", "node20.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	return node, suite, hook
}

// conformanceCheck is one check of a scenario's checks.json.
type conformanceCheck struct {
	ID           string `json:"id"`
	Status       string `json:"status"` // SUCCESS, FAILURE, WARNING, INFO
	Description  string `json:"description"`
	ErrorMessage string `json:"errorMessage"`
}

// conformanceChecks reads the checks the suite wrote for scenario under out
// (its folder, also returned, is the scenario's name, with prefix, then a
// timestamp).
func conformanceChecks(t *testing.T, out, prefix, scenario string) ([]conformanceCheck, string) {
	t.Helper()
	found, _ := filepath.Glob(filepath.Join(out, prefix+scenario+"-[0-9][0-9][0-9][0-9]-*", "checks.json"))
	if len(found) != 1 {
		t.Fatalf("scenario %s: want one checks.json under %s, found %d", scenario, out, len(found))
	}
	b, err := os.ReadFile(found[0])
	if err != nil {
		t.Fatal(err)
	}
	var checks []conformanceCheck
	if err := json.Unmarshal(b, &checks); err != nil {
		t.Fatalf("scenario %s: %s: %v", scenario, found[0], err)
	}
	return checks, filepath.Dir(found[0])
}

// judgeConformance fails t for each FAILURE among checks and logs each
// WARNING; a scenario with no check at all fails too.
func judgeConformance(t *testing.T, scenario string, checks []conformanceCheck) {
	t.Helper()
	judged := 0
	for _, c := range checks {
		switch c.Status {
		case "FAILURE":
			judged++
			t.Errorf("%s: check %s failed: %s %s", scenario, c.ID, c.Description, c.ErrorMessage)
		case "WARNING":
			judged++
			t.Logf("%s: check %s warns: %s %s", scenario, c.ID, c.Description, c.ErrorMessage)
		case "SUCCESS":
			judged++
		}
	}
	if judged == 0 {
		t.Errorf("%s: the suite judged nothing (%d INFO checks)", scenario, len(checks))
	}
}

// TestConformance runs the official MCP conformance suite against toolgate:
// its server scenarios against `serve --http`, its client scenarios with
// toolgate (on stdio, driven by this test binary) as the client of the
// suite's test servers. Each scenario that applies must pass; the others are
// listed with why.
func TestConformance(t *testing.T) {
	node, suite, hook := conformanceSuite(t)
	conformance := func(args ...string) *exec.Cmd {
		return exec.Command(node, append([]string{"--import", hook, suite}, args...)...)
	}

	t.Run("every scenario placed", func(t *testing.T) {
		out, err := conformance("list").CombinedOutput()
		if err != nil {
			t.Fatalf("conformance list: %v\n%s", err, out)
		}
		listed := map[string][]string{}
		side := ""
		for line := range strings.Lines(string(out)) {
			switch {
			case strings.HasPrefix(line, "Server scenarios"):
				side = "server"
			case strings.HasPrefix(line, "Client scenarios"):
				side = "client"
			case strings.HasPrefix(line, "  - ") && side != "":
				listed[side] = append(listed[side], strings.Fields(line)[1])
			}
		}
		clientApplies := slices.Sorted(maps.Keys(conformanceClientApplies))
		for _, c := range []struct {
			side    string
			applies []string
			na      map[string]string
		}{
			{"server", conformanceServerApplies, conformanceServerNotApplicable},
			{"client", clientApplies, conformanceClientNotApplicable},
		} {
			for _, s := range listed[c.side] {
				if _, na := c.na[s]; !na && !slices.Contains(c.applies, s) {
					t.Errorf("%s scenario %s is in neither of conformance_test.go's tables: run it, and add it to those that apply or, with why, to those that do not", c.side, s)
				}
			}
			for _, s := range c.applies {
				if !slices.Contains(listed[c.side], s) {
					t.Errorf("%s scenario %s is not one the suite lists", c.side, s)
				}
			}
			for s := range c.na {
				if !slices.Contains(listed[c.side], s) {
					t.Errorf("%s scenario %s is not one the suite lists", c.side, s)
				}
			}
		}
	})

	t.Run("server", func(t *testing.T) {
		addr := freeAddr(t)
		cmd := toolgateCmd(t, t.TempDir(), "serve", "--config", bundledConfig(t, nil), "--http", addr, "--mode", "bm25")
		cmd.Stderr = testLog(t, "toolgate: ")
		startHTTP(t, cmd, addr, 2*time.Minute)
		out := t.TempDir()
		// --suite all: the active scenarios and the pending ones. The
		// exit status counts those that do not apply: each is judged below.
		run := conformance("server", "--url", "http://"+addr+"/mcp", "--suite", "all", "-o", out)
		run.Stderr = testLog(t, "conformance: ")
		if b, err := run.Output(); err != nil && run.ProcessState.ExitCode() != 1 {
			t.Fatalf("conformance server: %v\n%s", err, b)
		}
		for _, s := range conformanceServerApplies {
			t.Run(s, func(t *testing.T) {
				checks, _ := conformanceChecks(t, out, "server-", s)
				judgeConformance(t, s, checks)
			})
		}
	})

	t.Run("client", func(t *testing.T) {
		if strings.ContainsAny(os.Args[0], " \t") {
			t.Fatalf("the test binary's path %q has a space: the suite splits its --command at spaces (set TMPDIR or go test -o to a path without one)", os.Args[0])
		}
		for _, s := range slices.Sorted(maps.Keys(conformanceClientApplies)) {
			t.Run(s, func(t *testing.T) {
				out := t.TempDir()
				run := conformance("client", "--command", os.Args[0], "--scenario", s, "--timeout", "60000", "-o", out)
				run.Env = append(os.Environ(), envConformanceClient+"=1")
				run.Stderr = testLog(t, "conformance: ")
				b, err := run.Output()
				if err != nil && run.ProcessState.ExitCode() != 1 {
					t.Fatalf("conformance client %s: %v\n%s", s, err, b)
				}
				checks, dir := conformanceChecks(t, out, "", s)
				judgeConformance(t, s, checks)
				if id, ok := conformanceMustSucceed[s]; ok && !slices.ContainsFunc(checks, func(c conformanceCheck) bool { return c.ID == id && c.Status == "SUCCESS" }) {
					t.Errorf("%s: check %s did not succeed (a warning is a failure here)", s, id)
				}
				if t.Failed() || testing.Verbose() {
					log, _ := os.ReadFile(filepath.Join(dir, "stderr.txt"))
					t.Logf("conformance client %s:\n%s\nthe driver's and toolgate's stderr:\n%s", s, b, log)
				}
			})
		}
	})
}

// stepUpLogin is the part of a 403's error that names the scopes a server
// wants and the login to run, which the driver, as an operator would, runs
// as it is quoted.
var stepUpLogin = regexp.MustCompile("the server wants the scopes \"[^\"]*\", which the login was not given: run `(toolgate auth login [^`]*)`")

// conformanceClientMain is the conformance suite's client command: the test
// binary started by the suite with its test server's URL as the last argument
// and the scenario in MCP_CONFORMANCE_SCENARIO. It writes a config whose one
// server, "conf", is that URL (with the client the scenario registered ahead
// of time, MCP_CONFORMANCE_CONTEXT, in its "oauth"), logs in as a user would
// for an auth/ scenario (`toolgate auth login --no-browser`, the printed URL
// opened, which the suite's authorization server approves at once), starts
// `toolgate serve` on stdio and calls the scenario's tool through
// execute_tool. The suite judges what reached its server.
func conformanceClientMain(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "conformance driver: want the test server's URL as the last argument")
		return 2
	}
	url, scenario := args[len(args)-1], os.Getenv("MCP_CONFORMANCE_SCENARIO")
	tool, ok := conformanceClientApplies[scenario]
	if !ok {
		fmt.Fprintf(os.Stderr, "conformance driver: scenario %q is not one conformance_test.go runs\n", scenario)
		return 2
	}
	dir, err := os.MkdirTemp("", "toolgate-conformance-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformance driver:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	var pre struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
	}
	if c := os.Getenv("MCP_CONFORMANCE_CONTEXT"); c != "" {
		if err := json.Unmarshal([]byte(c), &pre); err != nil {
			fmt.Fprintln(os.Stderr, "conformance driver: MCP_CONFORMANCE_CONTEXT:", err)
			return 1
		}
	}
	entry := map[string]any{"url": url}
	oauth := map[string]any{}
	if pre.ClientID != "" {
		oauth["clientId"] = pre.ClientID
		if pre.ClientSecret != "" {
			oauth["clientSecret"] = pre.ClientSecret
		}
	}
	cfg := filepath.Join(dir, "toolgate.json")
	writeCfg := func() error {
		if len(oauth) > 0 {
			entry["oauth"] = oauth
		}
		b, err := json.Marshal(map[string]any{"mcpServers": map[string]any{"conf": entry}})
		if err != nil {
			return err
		}
		return os.WriteFile(cfg, b, 0o600)
	}
	if err := writeCfg(); err != nil {
		fmt.Fprintln(os.Stderr, "conformance driver:", err)
		return 1
	}
	// The children are toolgate, not drivers: this binary with
	// TOOLGATE_E2E_MAIN and without envConformanceClient.
	env := []string{"TOOLGATE_E2E_MAIN=1", "TOOLGATE_DATA_DIR=" + dir}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, envConformanceClient+"=") {
			env = append(env, kv)
		}
	}
	toolgate := func(args ...string) *exec.Cmd {
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = env
		cmd.Stderr = os.Stderr
		return cmd
	}
	login := func() {
		if err := conformanceLogin(toolgate("auth", "login", "conf", "--config", cfg, "--no-browser", "--timeout", "30s")); err != nil {
			// Some scenarios want the login refused (auth/resource-mismatch):
			// the suite judges, the driver goes on as a user would.
			fmt.Fprintln(os.Stderr, "conformance driver: login:", err)
		}
	}
	if strings.HasPrefix(scenario, "auth/") {
		login()
	}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "conformance-driver", Version: "1.0.0"}, nil).
		Connect(ctx, &mcp.CommandTransport{Command: toolgate("serve", "--config", cfg, "--mode", "bm25")}, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformance driver: connect to toolgate serve:", err)
		return 1
	}
	defer cs.Close()
	execute := func(name string, args map[string]any) (*mcp.CallToolResult, error) {
		return cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_tool", Arguments: map[string]any{"name": name, "arguments": args}})
	}
	// Until toolgate has connected to the suite's server (or given up):
	// the initialize scenario is judged on that connection alone.
	state := any(nil)
	if !testenv.Poll(40*time.Second, func() bool {
		res, err := execute("toolgate__server_status", map[string]any{"name": "conf"})
		if err != nil {
			return false
		}
		st, _ := res.StructuredContent.(map[string]any)
		state = st["state"]
		return state != nil && state != string(backend.StateConnecting)
	}) {
		fmt.Fprintf(os.Stderr, "conformance driver: conf is still %v\n", state)
		return 1
	}
	fmt.Fprintf(os.Stderr, "conformance driver: conf is %v\n", state)
	if tool == "" {
		return 0
	}
	toolArgs := map[string]any{}
	if tool == "add_numbers" {
		toolArgs = map[string]any{"a": 2, "b": 3}
	}
	res, err := execute("conf__"+tool, toolArgs)
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformance driver: execute_tool:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "conformance driver: conf__%s: isError=%v %s\n", tool, res.IsError, resultText(res))
	if m := stepUpLogin.FindStringSubmatch(resultText(res)); res.IsError && m != nil {
		// The operator's step the 403 names: the command it quotes, run
		// by a shell as written, the config left as it is (the browser is
		// the driver: --no-browser, and it opens the printed URL).
		if err := conformanceStepUp(dir, m[1], env); err != nil {
			fmt.Fprintln(os.Stderr, "conformance driver: step-up login:", err)
		}
		// The gateway takes the new login within a second; a server that
		// still refuses (auth/scope-retry-limit) is left there.
		testenv.Poll(5*time.Second, func() bool {
			res, err = execute("conf__"+tool, toolArgs)
			return err != nil || !res.IsError
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "conformance driver: execute_tool:", err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "conformance driver: conf__%s after the login: isError=%v %s\n", tool, res.IsError, resultText(res))
	}
	return 0
}

// conformanceStepUp runs command, the login a 403's error quotes, through
// sh with `toolgate` on the PATH (this binary, as a toolgate child: env),
// as an operator pastes it, --no-browser added for the driver's browser.
func conformanceStepUp(dir, command string, env []string) error {
	self, err := filepath.Abs(os.Args[0])
	if err != nil {
		return err
	}
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o700); err != nil {
		return err
	}
	if err := os.Symlink(self, filepath.Join(bin, "toolgate")); err != nil && !os.IsExist(err) {
		return err
	}
	fmt.Fprintf(os.Stderr, "conformance driver: running what the error says: %s\n", command)
	cmd := exec.Command("sh", "-c", command+" --no-browser --timeout 30s")
	cmd.Env = append(slices.Clone(env), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	return conformanceLogin(cmd)
}

// authorizeURL is the authorization URL `toolgate auth login` prints.
var authorizeURL = regexp.MustCompile(`https?://\S*response_type=\S*`)

// conformanceLogin runs cmd, a `toolgate auth login --no-browser`, and opens
// the URL it prints as a browser would: the suite's authorization server
// approves at once and redirects to the login's callback on 127.0.0.1.
func conformanceLogin(cmd *exec.Cmd) error {
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return err
	}
	opened := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		asked := false
		for sc.Scan() {
			fmt.Fprintln(os.Stderr, "login:", sc.Text())
			if u := authorizeURL.FindString(sc.Text()); u != "" && !asked {
				asked = true
				go func() {
					resp, err := http.Get(u) // follows the redirect to the callback
					if err == nil {
						resp.Body.Close()
					}
					opened <- err
				}()
			}
		}
	}()
	err := cmd.Wait()
	pw.Close()
	select {
	case oerr := <-opened:
		if err == nil && oerr != nil {
			err = oerr
		}
	default:
	}
	return err
}
