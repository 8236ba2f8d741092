// Package indextest owns the synthetic tool catalogs used by benchmarks: a
// deterministic generator (fixed seed) of MCP-shaped tools — verb_noun names
// spread over many servers, one-to-three-sentence descriptions from varied
// vocabulary, JSON Schemas with one to six typed, described parameters — and
// queries that paraphrase random tools' descriptions. The Go benchmarks and
// toolgate-bench (cmd/toolgate-bench) share it, so their figures are about the same
// catalogs. It is never linked into bin/toolgate.
package indextest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/toolgate/toolgate/index/catalog"
)

// Seed is the default seed: the same n always gives the same catalog.
const Seed = 20261130

// Sizes are the catalog sizes the benchmarks report.
var Sizes = []int{100, 1000, 10000, 50000}

type domain struct {
	name    string
	nouns   []string
	objects []string // what the nouns live in ("repository", "workspace"...)
	extras  []string // domain words for descriptions
}

var domains = []domain{
	{"github", []string{"issue", "pull_request", "branch", "commit", "release", "workflow", "review", "label", "milestone", "gist"}, []string{"repository", "organization"}, []string{"merge", "diff", "assignee", "reviewer", "SHA", "tag"}},
	{"gitlab", []string{"merge_request", "pipeline", "job", "runner", "snippet", "project", "epic"}, []string{"group", "project"}, []string{"CI", "artifact", "stage", "approval"}},
	{"jira", []string{"ticket", "sprint", "board", "epic", "worklog", "transition", "component"}, []string{"project", "backlog"}, []string{"story points", "assignee", "priority", "status"}},
	{"linear", []string{"issue", "cycle", "team", "roadmap", "comment"}, []string{"workspace", "team"}, []string{"estimate", "triage", "priority"}},
	{"slack", []string{"message", "channel", "thread", "reaction", "user", "reminder", "file"}, []string{"workspace", "conversation"}, []string{"emoji", "mention", "DM", "timestamp"}},
	{"discord", []string{"message", "guild", "role", "webhook", "member"}, []string{"server", "channel"}, []string{"permission", "embed", "moderation"}},
	{"gmail", []string{"email", "draft", "label", "attachment", "thread", "filter"}, []string{"mailbox", "inbox"}, []string{"recipient", "subject", "CC", "unread"}},
	{"calendar", []string{"event", "calendar", "attendee", "availability", "reminder"}, []string{"calendar", "schedule"}, []string{"time zone", "recurrence", "invite", "free/busy"}},
	{"postgres", []string{"table", "row", "schema", "index", "query", "view", "migration"}, []string{"database", "cluster"}, []string{"SQL", "transaction", "column", "constraint"}},
	{"mysql", []string{"table", "database", "user", "grant", "procedure"}, []string{"instance", "schema"}, []string{"replica", "binlog", "charset"}},
	{"mongodb", []string{"document", "collection", "index", "aggregation"}, []string{"database", "cluster"}, []string{"BSON", "filter", "projection"}},
	{"redis", []string{"key", "hash", "stream", "set", "channel"}, []string{"instance", "keyspace"}, []string{"TTL", "expiry", "pub/sub"}},
	{"s3", []string{"bucket", "object", "policy", "presigned_url", "multipart_upload"}, []string{"account", "region"}, []string{"prefix", "ACL", "versioning", "storage class"}},
	{"gcs", []string{"bucket", "blob", "notification", "hmac_key"}, []string{"project", "location"}, []string{"lifecycle", "retention"}},
	{"azure", []string{"resource_group", "storage_account", "vm", "keyvault_secret", "app_service", "subscription"}, []string{"subscription", "tenant"}, []string{"ARM", "SKU", "managed identity"}},
	{"kubernetes", []string{"pod", "deployment", "service", "namespace", "configmap", "secret", "node", "ingress"}, []string{"cluster", "namespace"}, []string{"replica", "container", "manifest", "kubectl"}},
	{"docker", []string{"container", "image", "volume", "network", "compose_stack"}, []string{"host", "registry"}, []string{"tag", "layer", "port mapping"}},
	{"terraform", []string{"workspace", "plan", "state", "module", "variable"}, []string{"organization", "workspace"}, []string{"drift", "provider", "apply"}},
	{"filesystem", []string{"file", "directory", "symlink", "permission", "path"}, []string{"workspace", "sandbox"}, []string{"glob", "encoding", "line ending"}},
	{"browser", []string{"page", "tab", "screenshot", "element", "cookie", "form"}, []string{"browser", "session"}, []string{"selector", "viewport", "DOM", "navigation"}},
	{"search", []string{"web_result", "news_article", "image_result", "answer"}, []string{"index", "engine"}, []string{"ranking", "snippet", "freshness"}},
	{"notion", []string{"page", "database", "block", "comment", "property"}, []string{"workspace", "teamspace"}, []string{"rich text", "relation", "rollup"}},
	{"confluence", []string{"page", "space", "attachment", "label"}, []string{"space", "site"}, []string{"macro", "version history"}},
	{"stripe", []string{"customer", "invoice", "payment_intent", "subscription", "refund", "price", "coupon"}, []string{"account", "connected account"}, []string{"currency", "amount in cents", "webhook"}},
	{"shopify", []string{"product", "order", "inventory_item", "collection", "fulfillment", "discount"}, []string{"store", "shop"}, []string{"variant", "SKU", "checkout"}},
	{"salesforce", []string{"lead", "opportunity", "account", "contact", "case", "report"}, []string{"org", "pipeline"}, []string{"SOQL", "owner", "stage"}},
	{"hubspot", []string{"deal", "contact", "company", "ticket", "campaign"}, []string{"portal", "pipeline"}, []string{"lifecycle stage", "property"}},
	{"zendesk", []string{"ticket", "macro", "agent", "satisfaction_rating"}, []string{"helpdesk", "brand"}, []string{"SLA", "requester", "tag"}},
	{"sentry", []string{"issue", "event", "release", "alert_rule", "project"}, []string{"organization", "project"}, []string{"stack trace", "breadcrumb", "regression"}},
	{"datadog", []string{"monitor", "dashboard", "metric", "log", "incident", "slo"}, []string{"organization", "account"}, []string{"tag", "threshold", "query"}},
	{"pagerduty", []string{"incident", "schedule", "escalation_policy", "service", "on_call"}, []string{"account", "team"}, []string{"acknowledge", "urgency"}},
	{"grafana", []string{"dashboard", "panel", "datasource", "alert", "folder"}, []string{"organization", "instance"}, []string{"PromQL", "annotation"}},
	{"spotify", []string{"track", "playlist", "album", "artist", "queue"}, []string{"library", "account"}, []string{"playback", "device"}},
	{"youtube", []string{"video", "playlist", "comment", "channel", "caption"}, []string{"channel", "account"}, []string{"transcript", "views", "thumbnail"}},
	{"maps", []string{"place", "route", "geocode", "distance_matrix", "timezone"}, []string{"region", "map"}, []string{"latitude", "longitude", "travel mode"}},
	{"weather", []string{"forecast", "current_conditions", "alert", "air_quality"}, []string{"location", "station"}, []string{"temperature", "humidity", "wind"}},
	{"memory", []string{"entity", "relation", "observation", "memory"}, []string{"knowledge graph", "store"}, []string{"embedding", "recall"}},
	{"figma", []string{"file", "frame", "component", "comment", "style"}, []string{"team", "project"}, []string{"layer", "node id", "export"}},
	{"airtable", []string{"record", "base", "table", "view", "field"}, []string{"base", "workspace"}, []string{"formula", "linked record"}},
	{"twilio", []string{"sms", "call", "phone_number", "verification"}, []string{"account", "messaging service"}, []string{"E.164", "status callback"}},
}

type verb struct {
	name    string
	phrases []string // description openers, %s = the noun phrase
	params  []string // parameter kinds this verb tends to take
}

var verbs = []verb{
	{"list", []string{"List %s", "Return all %s", "Enumerate the %s"}, []string{"container", "limit", "cursor", "filter", "sort"}},
	{"get", []string{"Get a single %s", "Fetch one %s", "Retrieve the details of a %s"}, []string{"id", "container", "fields"}},
	{"create", []string{"Create a new %s", "Add a %s", "Make a %s"}, []string{"container", "name", "body", "tags"}},
	{"update", []string{"Update an existing %s", "Change the fields of a %s", "Modify a %s"}, []string{"id", "body", "name", "tags"}},
	{"delete", []string{"Delete a %s", "Permanently remove a %s", "Remove the %s"}, []string{"id", "force"}},
	{"search", []string{"Search %s", "Find %s matching a query", "Look up %s by keyword"}, []string{"query", "limit", "filter", "since"}},
	{"archive", []string{"Archive a %s", "Move a %s to the archive"}, []string{"id", "reason"}},
	{"export", []string{"Export %s", "Download %s as a file"}, []string{"container", "format", "since"}},
	{"import", []string{"Import %s", "Bulk load %s from a file"}, []string{"container", "url", "format"}},
	{"count", []string{"Count %s", "Return how many %s exist"}, []string{"container", "filter"}},
	{"watch", []string{"Subscribe to changes of a %s", "Watch a %s for updates"}, []string{"id", "url"}},
	{"assign", []string{"Assign a %s to someone", "Set the owner of a %s"}, []string{"id", "user"}},
	{"close", []string{"Close a %s", "Mark a %s as done"}, []string{"id", "reason"}},
	{"restore", []string{"Restore a deleted %s", "Undo the removal of a %s"}, []string{"id"}},
	{"copy", []string{"Copy a %s", "Duplicate a %s"}, []string{"id", "container", "name"}},
	{"validate", []string{"Validate a %s", "Check a %s for errors"}, []string{"id", "body"}},
	{"summarize", []string{"Summarize a %s", "Produce a short summary of the %s"}, []string{"id", "limit"}},
	{"share", []string{"Share a %s", "Grant access to a %s"}, []string{"id", "user", "role"}},
}

var middles = []string{
	"in a %s", "from the %s", "within the given %s", "across the %s", "for the current %s",
}

var tails = []string{
	"Returns the %s with its id, owner and timestamps.",
	"Results are paginated; pass the cursor from the previous page to continue.",
	"Requires write access to the %s.",
	"Use this when the user asks about %s.",
	"The response includes %s and links to the web UI.",
	"Fails if the %s does not exist or the token lacks permission.",
	"Supports filtering by %s.",
	"Changes are applied immediately and cannot be undone.",
	"Large results are truncated to the first 100 items.",
	"Rate limited to 60 requests per minute.",
	"Times are in UTC, ISO 8601.",
	"Useful for auditing %s and reporting.",
}

type paramKind struct {
	name, typ, desc string
}

func paramFor(kind string, d domain, noun string, r *rand.Rand) paramKind {
	obj := d.objects[r.IntN(len(d.objects))]
	switch kind {
	case "id":
		return paramKind{noun + "_id", "string", fmt.Sprintf("The unique identifier of the %s", human(noun))}
	case "container":
		return paramKind{strings.ReplaceAll(obj, " ", "_"), "string", fmt.Sprintf("Name or id of the %s", obj)}
	case "limit":
		return paramKind{"limit", "integer", "Maximum number of results to return (1-100)"}
	case "cursor":
		return paramKind{"cursor", "string", "Pagination cursor returned by the previous call"}
	case "filter":
		return paramKind{"filter", "object", fmt.Sprintf("Filter on %s fields such as %s", human(noun), d.extras[r.IntN(len(d.extras))])}
	case "sort":
		return paramKind{"sort", "string", "Sort order: created, updated or name"}
	case "fields":
		return paramKind{"fields", "array", "Fields to include in the response"}
	case "name":
		return paramKind{"name", "string", fmt.Sprintf("Display name of the %s", human(noun))}
	case "body":
		return paramKind{"body", "object", fmt.Sprintf("The %s attributes to set", human(noun))}
	case "tags":
		return paramKind{"tags", "array", "Labels to attach"}
	case "force":
		return paramKind{"force", "boolean", "Skip the confirmation and delete dependants too"}
	case "query":
		return paramKind{"query", "string", fmt.Sprintf("Free-text query, e.g. a %s or %s", d.extras[r.IntN(len(d.extras))], human(noun))}
	case "since":
		return paramKind{"since", "string", "Only items changed after this ISO 8601 time"}
	case "reason":
		return paramKind{"reason", "string", "Why, recorded in the audit log"}
	case "format":
		return paramKind{"format", "string", "Output format: json, csv or markdown"}
	case "url":
		return paramKind{"url", "string", "URL to read from or to notify"}
	case "user":
		return paramKind{"user", "string", "User name or email address"}
	case "role":
		return paramKind{"role", "string", "Access level: viewer, editor or owner"}
	}
	return paramKind{kind, "string", kind}
}

var extraParams = []string{"dry_run:boolean:Report what would change without changing it",
	"timeout_seconds:integer:Give up after this many seconds",
	"include_archived:boolean:Also return archived items",
	"locale:string:Language for human-readable fields, e.g. en-US",
	"page_size:integer:Items per page"}

func human(s string) string { return strings.ReplaceAll(s, "_", " ") }

func plural(s string) string {
	s = human(s)
	switch {
	case strings.HasSuffix(s, "s"), strings.HasSuffix(s, "x"), strings.HasSuffix(s, "sh"), strings.HasSuffix(s, "ch"):
		return s + "es"
	case strings.HasSuffix(s, "y") && !strings.HasSuffix(s, "ey") && !strings.HasSuffix(s, "ay"):
		return s[:len(s)-1] + "ies"
	}
	return s + "s"
}

// Catalog returns n distinct tools generated from seed. About 25 tools per
// server; server names are domain names, numbered when a domain repeats
// ("github", "github-2", …), like several accounts of one service. A smaller
// catalog is a prefix of a larger one with the same seed (up to 50,000
// tools), so embeddings cached for one size serve the others.
func Catalog(n int, seed uint64) []catalog.Tool {
	r := rand.New(rand.NewPCG(seed, 0))
	tools := make([]catalog.Tool, 0, n)
	perServer := 25
	servers := max(1, (n+perServer-1)/perServer)
	seen := map[string]bool{}
	for s := 0; s < servers && len(tools) < n; s++ {
		d := domains[s%len(domains)]
		srv := d.name
		if k := s / len(domains); k > 0 {
			srv = fmt.Sprintf("%s-%d", d.name, k+1)
		}
		for j := 0; j < perServer*3 && len(tools) < min(n, (s+1)*perServer); j++ {
			t, ok := tool(r, d, srv, seen)
			if ok {
				tools = append(tools, t)
			}
		}
	}
	// Domains have finitely many verb×noun pairs: top up with qualified names.
	for len(tools) < n {
		d := domains[r.IntN(len(domains))]
		srv := fmt.Sprintf("%s-%d", d.name, 1000+r.IntN(1000))
		if t, ok := tool(r, d, srv, seen); ok {
			tools = append(tools, t)
		}
	}
	return tools
}

var qualifiers = []string{"", "", "", "", "batch", "v2", "async", "by_name", "details", "all", "recent", "bulk"}

func tool(r *rand.Rand, d domain, srv string, seen map[string]bool) (catalog.Tool, bool) {
	v := verbs[r.IntN(len(verbs))]
	noun := d.nouns[r.IntN(len(d.nouns))]
	name := v.name + "_" + noun
	if q := qualifiers[r.IntN(len(qualifiers))]; q != "" {
		name += "_" + q
	}
	id := catalog.JoinID(srv, name)
	if seen[id] {
		return catalog.Tool{}, false
	}
	seen[id] = true
	np := human(noun)
	if v.name == "list" || v.name == "search" || v.name == "export" || v.name == "import" || v.name == "count" {
		np = plural(noun)
	}
	obj := d.objects[r.IntN(len(d.objects))]
	var desc strings.Builder
	desc.WriteString(fmt.Sprintf(v.phrases[r.IntN(len(v.phrases))], np))
	desc.WriteString(" ")
	desc.WriteString(fmt.Sprintf(middles[r.IntN(len(middles))], obj))
	if r.IntN(2) == 0 {
		desc.WriteString(" using the " + d.name + " API")
	}
	desc.WriteString(".")
	for range r.IntN(3) {
		t := tails[r.IntN(len(tails))]
		arg := []string{np, obj, d.extras[r.IntN(len(d.extras))]}[r.IntN(3)]
		if strings.Contains(t, "%s") {
			t = fmt.Sprintf(t, arg)
		}
		desc.WriteString(" " + t)
	}
	return catalog.Tool{Server: srv, Name: name, Description: desc.String(), InputSchema: schema(r, v, d, noun)}, true
}

func schema(r *rand.Rand, v verb, d domain, noun string) json.RawMessage {
	type prop struct {
		Type        string `json:"type"`
		Description string `json:"description"`
	}
	props := map[string]prop{}
	var required []string
	want := 1 + r.IntN(6)
	for _, k := range v.params {
		if len(props) >= want {
			break
		}
		p := paramFor(k, d, noun, r)
		props[p.name] = prop{p.typ, p.desc}
		if k == "id" || k == "query" || (k == "container" && r.IntN(2) == 0) {
			required = append(required, p.name)
		}
	}
	for len(props) < want {
		f := strings.SplitN(extraParams[r.IntN(len(extraParams))], ":", 3)
		if _, dup := props[f[0]]; dup && len(props) >= len(extraParams) {
			break
		}
		props[f[0]] = prop{f[1], f[2]}
	}
	s := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		s["required"] = required
	}
	b, _ := json.Marshal(s)
	return b
}

// Query is a search with the tool it paraphrases.
type Query struct {
	Text string
	Want string // tool ID
}

var askers = []string{"", "", "please ", "can you ", "I need to ", "how do I ", "help me "}

var synonyms = map[string][]string{
	"list": {"show all", "show me the", "what are the"}, "get": {"look at", "open", "show details of"},
	"create": {"make", "add", "set up"}, "update": {"edit", "change", "rename"}, "delete": {"remove", "get rid of", "drop"},
	"search": {"find", "look for"}, "archive": {"put away", "archive"}, "export": {"download", "dump"},
	"import": {"upload", "load"}, "count": {"how many", "number of"}, "watch": {"notify me about", "follow"},
	"assign": {"give", "hand over"}, "close": {"finish", "resolve"}, "restore": {"undelete", "bring back"},
	"copy": {"clone", "duplicate"}, "validate": {"check", "lint"}, "summarize": {"sum up", "give an overview of"},
	"share": {"give access to", "invite someone to"},
}

// Queries returns n searches, each a paraphrase of a random tool's name and
// description (verb synonym, noun, the service, sometimes a word of its
// description), so a good ranker finds its tool near the top.
func Queries(tools []catalog.Tool, n int, seed uint64) []Query {
	r := rand.New(rand.NewPCG(seed, uint64(len(tools))+7))
	out := make([]Query, 0, n)
	for range n {
		t := tools[r.IntN(len(tools))]
		parts := strings.SplitN(t.Name, "_", 2)
		v, noun := parts[0], ""
		if len(parts) > 1 {
			noun = human(parts[1])
		}
		syn := synonyms[v]
		verbText := v
		if len(syn) > 0 {
			verbText = syn[r.IntN(len(syn))]
		}
		q := askers[r.IntN(len(askers))] + verbText + " " + noun
		srv, _, _ := strings.Cut(t.Server, "-")
		if r.IntN(2) == 0 {
			q += " in " + srv
		}
		if w := strings.Fields(t.Description); len(w) > 6 && r.IntN(2) == 0 {
			q += " " + strings.Trim(strings.ToLower(w[len(w)-1]), ".")
		}
		out = append(out, Query{Text: q, Want: t.ID()})
	}
	return out
}
