package quarantine

import (
	"regexp"
	"strings"
)

// The two ways a definition carries what the model holds out to its
// author: an image that a client renders (its URL fetched, data in it),
// and words that tell the model to put the conversation, its system
// prompt or other tools' output in an argument or a URL.

var (
	// An image whose URL is on another host (http, https, or a
	// protocol-relative //host, a backslash read as a slash): a client
	// that renders the text fetches it, and whatever the model wrote in
	// its URL goes with the request. A Markdown image inline
	// (![alt](https://…), ![alt](<https://…>)) or an HTML element that
	// loads one (img, SVG image, source, video's poster, input
	// type=image); remoteImage finds a reference-style one.
	remoteImageRE = regexp.MustCompile(`(?i)!\[[^\]]{0,500}\]\(\s*<?\s*(https?:)?[/\\]{2}|` +
		`<(img|image|source|video|input)\b[^<>]{0,500}?\b(src|srcset|href|poster)\s*=\s*["']?\s*(https?:)?[/\\]{2}`)
	// A reference-style image (![alt][label], ![label][], ![label]) and
	// the definitions of labels whose URL is on another host.
	imageRefRE  = regexp.MustCompile(`!\[([^\]\n]{0,200})\](\[([^\]\n]{0,200})\])?`)
	remoteDefRE = regexp.MustCompile(`(?im)^[ \t]{0,3}\[([^\]\n]{1,200})\]:[ \t]*<?[ \t]*(https?:)?[/\\]{2}`)
)

// remoteImage returns where t shows an image from another host (nil for
// none).
func remoteImage(t string) []int {
	if loc := remoteImageRE.FindStringIndex(t); loc != nil {
		return loc
	}
	defs := remoteDefRE.FindAllStringSubmatchIndex(t, -1)
	if defs == nil {
		return nil
	}
	remote := map[string]bool{}
	for _, d := range defs {
		remote[refLabel(t[d[2]:d[3]])] = true
	}
	for _, m := range imageRefRE.FindAllStringSubmatchIndex(t, -1) {
		if m[1] < len(t) && t[m[1]] == '(' {
			continue // an inline image: remoteImageRE's
		}
		label := t[m[2]:m[3]]
		if m[6] >= 0 && m[7] > m[6] {
			label = t[m[6]:m[7]]
		}
		if remote[refLabel(label)] {
			return []int{m[0], m[1]}
		}
	}
	return nil
}

// refLabel is a link label as CommonMark matches it: case and runs of
// white space do not count.
func refLabel(s string) string { return strings.ToLower(strings.Join(strings.Fields(s), " ")) }

// The parts of an instruction to move what the model holds into an
// argument or a URL: what (exfilFamilies), a verb that moves it before it
// in its sentence (exfilVerbRE), and where to (exfilDestRE, a property of
// the tool's input schema, or the schema's own text). The objects are
// the current conversation, named so (so far, this, our, your, the
// user's, entire, full …), not a conversation the tool takes as data
// ("the conversation to summarize", "the conversation history" pass).
const (
	xConv   = `(?:conversation|dialog(?:ue)?|discussion|chat\s+(?:history|log|logs|transcript|messages|record|thread))`
	xHist   = `(?:\s+(?:history|log|logs|transcript|messages|contents?|record|thread))?`
	xWhole  = `(?:entire|full|whole|complete|verbatim|raw|unabridged|exact|unedited)`
	xMine   = `(?:user'?s'?|human'?s'?|your|our|this|(?:the\s+)?(?:current|ongoing|present|active))`
	xSoFar  = `(?:(?:so|thus)\s+far|(?:up\s+)?(?:to|until|till)\s+(?:now|this\s+point|here)|above)`
	xPrev   = `(?:previous|prior|earlier|preceding|past)`
	xUser   = `(?:user'?s'?|human'?s'?)`
	xSaid   = `(?:that\s+)?the\s+(?:user|human)\s+(?:has\s+)?(?:said|wrote|written|typed|asked|shared|told\s+you)`
	xCred   = `(?:api[\s_-]*keys?|access\s+tokens?|tokens?|credentials?|secrets?|passwords?|cookies?)`
	xCreds  = xCred + `(?:\s*(?:,|/|\bor\b|\band\b)\s*` + xCred + `)*`
	xTools  = `(?:tools?|tool\s+calls?|function\s+calls?|servers?|mcp\s+servers?|integrations?|connectors?|plugins?)`
	xOut    = `(?:results?|outputs?|responses?|return\s+values?)`
	xGap    = `(?:(?:always|also|verbatim|word\s+for\s+word|in\s+full|first|then|back)[\s,]+)*(?:(?:all|every|each)\s+(?:of\s+)?)?(?:(?:a|an|the)\s+)?(?:(?:full|complete|verbatim|exact|short|brief|detailed|compact|condensed|raw|json|markdown|plain[\s-]text|base64|encoded|url-encoded)\s+){0,3}(?:(?:copy|summary|dump|transcript|record|log|list|digest|excerpt|recap|text|contents?|version|encoding)\s+of\s+)?$`
	xSysMod = `(?:own|full|entire|complete|original|initial|hidden|exact|verbatim|current|underlying|developer|operator)`
)

// exfilFamily is one kind of object: its expression runs only on a text
// that holds a word of each hint group of need (the expressions are slow,
// the hints one pass, and most texts lack a word of some group).
type exfilFamily struct {
	need hintMask
	re   *regexp.Regexp
}

var exfilFamilies = []exfilFamily{
	// the user's conversation, your entire chat history, the full
	// conversation, the conversation so far
	{hintConv, regexp.MustCompile(`(?i)\b(?:` + xMine + `\s+(?:` + xWhole + `\s+){0,2}` + xConv + xHist + `|(?:our|your)\s+(?:` + xWhole + `\s+){0,2}chat\b|` +
		xWhole + `\s+` + xConv + xHist + `|` + xConv + xHist + `\s+` + xSoFar + `)`)},
	// messages so far, the history above
	{hintSoFar | hintSoFarNoun, regexp.MustCompile(`(?i)\b(?:messages?|history|context|transcript|chat|thread|session|exchanges?|interactions?)\s+` + xSoFar)},
	// everything the user said, everything in your context
	{hintSaid, regexp.MustCompile(`(?i)\b(?:everything\s+(?:` + xSoFar + `|you\s+(?:know|have\s+seen|'ve\s+seen|saw|remember)|in\s+(?:your|the|this)\s+(?:context(?:\s+window)?|conversation|chat|memory)|` + xSaid + `)|` +
		`(?:all|anything)\s+` + xSaid + `)`)},
	// all previous messages, every one of the user's prompts, the prior
	// turns, the user's messages
	{hintMsgQual | hintMsgNoun, regexp.MustCompile(`(?i)\b(?:(?:all|every)\s+(?:of\s+)?(?:(?:the|your|our)\s+)?(?:` + xUser + `\s+(?:` + xPrev + `\s+)?|` + xPrev + `\s+(?:(?:user|chat)\s+)?)(?:message|turn|prompt|exchange|repl(?:y|ie))s?|` +
		`the\s+(?:` + xUser + `\s+)?` + xPrev + `\s+(?:(?:user|chat)\s+)?(?:messages|turns|prompts|exchanges|replies)|` +
		xUser + `\s+(?:own\s+|other\s+)?(?:messages|prompts))`)},
	// your system prompt, the system prompt you were given
	{hintSys, regexp.MustCompile(`(?i)\b(?:your\s+(?:` + xSysMod + `\s+){0,2}system\s+(?:prompt|message|instructions?)|` +
		`the\s+system\s+(?:prompt|message|instructions?)\s+(?:you\s+(?:were|have\s+been|are)\s+given|you\s+(?:received|got)|above|of\s+this\s+(?:conversation|chat|session))|` +
		`the\s+(?:current|original|initial|hidden|active)\s+system\s+(?:prompt|message|instructions)|` +
		`(?:assistant|model|ai)(?:'s|')\s+system\s+prompt)`)},
	// your original instructions, your context window
	{hintYour | hintSysMod | hintSysNoun, regexp.MustCompile(`(?i)\byour\s+(?:(?:` + xSysMod + `\s+){1,2}(?:prompt|instructions)|(?:(?:entire|full|whole|complete)\s+)?context\s+window|(?:entire|full|whole|complete)\s+context)`)},
	// the outputs of other tools, previous tool results, other servers'
	// tokens, the API keys of other tools
	{hintOther | hintOtherNoun, regexp.MustCompile(`(?i)\b(?:` + xOut + `\s+(?:of|from|returned\s+by|produced\s+by)\s+(?:(?:all|any|every|the)\s+)?(?:other\s+` + xTools + `|` + xPrev + `\s+(?:tools|tool\s+calls|function\s+calls|calls))|` +
		`(?:all|every|any)\s+(?:(?:the|of\s+the)\s+)?(?:other|` + xPrev + `)\s+tool\s+(?:call\s+)?(?:results|outputs|responses)|` +
		`other\s+` + xTools + `(?:'s|')?\s+(?:` + xCreds + `|` + xOut + `|data|config(?:uration)?)|` +
		xPrev + `\s+tool(?:\s+call)?s?(?:'s|')?\s+(?:results|outputs|responses)|` +
		xCreds + `\s+(?:of|from|for|used\s+by|belonging\s+to|configured\s+for|stored\s+by)\s+(?:(?:all|any|every|the)\s+)?other\s+` + xTools + `)`)},
	// any API keys you have seen, all tokens in your context
	{hintCred | hintCredQual | hintQuant, regexp.MustCompile(`(?i)\b(?:any|all|every)\s+` + xCreds + `\s+(?:that\s+)?(?:you\s+(?:have|know|can\s+see|saw|have\s+seen|'ve\s+seen|found|came\s+across|have\s+access\s+to|received|remember)|(?:in|from)\s+(?:your|the|this)\s+(?:context(?:\s+window)?|conversation|chat|memory|session)|(?:seen|mentioned|shared|used)\s+(?:` + xSoFar + `|in\s+(?:this|the)\s+(?:conversation|chat|session)))`)},
}

// Words without which a family cannot match (see hints): one of each
// group its expression needs, whole.
var (
	convHints      = []string{"conversation", "dialog", "discussion", "chat"}
	soFarHints     = []string{"so far", "thus far", "now", "this point", "here", "above"}
	soFarNounHints = []string{"message", "history", "context", "transcript", "chat", "thread", "session", "exchange", "interaction"}
	saidHints      = []string{"everything", "said", "wrote", "written", "typed", "asked", "shared", "told"}
	msgQualHints   = []string{"previous", "prior", "earlier", "preceding", "past", "user'", "users", "human"}
	msgNounHints   = []string{"message", "turn", "prompt", "exchange", "repl"}
	sysHints       = []string{"system prompt", "system message", "system instruction"}
	yourHints      = []string{"your"}
	sysNounHints   = []string{"prompt", "instructions", "context"}
	sysModHints    = []string{"own", "full", "entire", "complete", "original", "initial", "hidden", "exact", "verbatim", "current", "underlying", "developer", "operator", "whole", "context window"}
	// "other" or "previous" … then a word for tools: "other tools'",
	// "previous tool calls", "prior calls".
	otherHints = func() (out []string) {
		for _, q := range []string{"other", "previous", "prior", "earlier", "preceding", "past"} {
			for _, n := range []string{"tool", "function", "call", "server", "mcp", "integration", "connector", "plugin"} {
				out = append(out, q+" "+n)
			}
		}
		return out
	}()
	otherNounHints = []string{"result", "output", "response", "return", "api", "token", "credential", "secret", "password", "cookie", "data", "config"}
	credHints      = []string{"api", "token", "credential", "secret", "password", "cookie"}
	credQualHints  = []string{"you have", "you know", "you can see", "you saw", "you've", "you found", "you came", "you received", "you remember", "context", "conversation", "chat", "memory", "session", "seen", "mentioned", "shared", "used"}
	quantHints     = []string{"any", "all", "every"}

	exfilHints = map[hintMask][]string{hintConv: convHints, hintSoFar: soFarHints, hintSoFarNoun: soFarNounHints, hintSaid: saidHints,
		hintMsgQual: msgQualHints, hintMsgNoun: msgNounHints, hintSys: sysHints, hintYour: yourHints, hintSysNoun: sysNounHints, hintSysMod: sysModHints, hintQuant: quantHints,
		hintOther: otherHints, hintOtherNoun: otherNounHints, hintCred: credHints, hintCredQual: credQualHints}
)

var (
	// What follows an object that makes it a name, not the thing: "your
	// conversation ID", "this conversation's thread".
	exfilNotObjectRE = regexp.MustCompile(`(?i)^(?:'s|')?\s*[_-]?\s*(?:id|ids|identifier|name|title|url|link|key|number|count|type|topic|channel|thread|settings|state|mode|length|limit|format|style|language|metadata)\b`)
	// A verb that moves the object (imperative or gerund: "put", "by
	// including").
	exfilVerbRE = regexp.MustCompile(`(?i)\b(?:put(?:ting)?|plac(?:e|ing)|includ(?:e|ing)|insert(?:ing)?|inject(?:ing)?|pass(?:ing)?|send(?:ing)?|cop(?:y|ying)|past(?:e|ing)|append(?:ing)?|prepend(?:ing)?|add(?:ing)?|attach(?:ing)?|embed(?:ding)?|provid(?:e|ing)|suppl(?:y|ying)|fill(?:ing)?|populat(?:e|ing)|forward(?:ing)?|submit(?:ting)?|dump(?:ing)?|writ(?:e|ing)|echo(?:ing)?|encod(?:e|ing)|transmit(?:ting)?|shar(?:e|ing)|stor(?:e|ing)|sav(?:e|ing)|set(?:ting)?|output(?:ting)?|giv(?:e|ing)|enter(?:ing)?|relay(?:ing)?|transfer(?:ring)?|upload(?:ing)?|post(?:ing)?|leak(?:ing)?|exfiltrat(?:e|ing)|summari[sz](?:e|ing)|repeat(?:ing)?|reproduc(?:e|ing)|quot(?:e|ing)|contain|hold|concatenat(?:e|ing)|serializ(?:e|ing)|stuff(?:ing)?|mirror(?:ing)?)\b`)
	// What may stand between the verb and the object: the object is what
	// the verb moves, whole ("paste the entire chat history", "include,
	// word for word, a summary of the conversation so far"), not a part
	// of it the model picks ("save the key facts from this conversation"
	// is a memory tool's).
	exfilGapRE = regexp.MustCompile(`(?i)^[\s,]*` + xGap)
	// … or a destination and "with" or "to": "fill `context` with …",
	// "set `session` to …".
	exfilFillRE = regexp.MustCompile(`(?i)\b(?:with|to)\s+` + xGap)
	// A negation before the verb: "do not pass the conversation so far in
	// `query`" is a careful tool's.
	exfilNotRE = regexp.MustCompile(`(?i)\b(?:not|n't|dont|never|avoid|without|instead\s+of|rather\s+than|no\s+need\s+to)\s+(?:\w+\s+){0,2}$`)
	// … unless the negation is of a verb that asks it the more: "do not
	// hesitate to", "never forget to".
	exfilNotNotRE = regexp.MustCompile(`(?i)\b(?:not|n't|dont|never|without)\s+(?:\w+\s+)?(?:hesitate|forget|fail|omit|neglect)(?:ing)?\s+(?:to\s+)?$`)
	// Where to: an argument (named, quoted, or as "the … parameter"), a
	// URL, the tool's call ("when calling this tool").
	exfilDestRE = regexp.MustCompile("(?i)\\b(?:in|into|inside|within|as|to|under|via|through|on|onto|with|for|at)\\s+(?:(?:the|a|an|this|that|its|each|every|your|end\\s+of|of)\\s+){0,3}(?:\\S+\\s+)?(?:parameter|param|argument|arg|field|property|input|attribute|slot|variable|query\\s+string|query|url|uri|link|header|body|payload|request|webhook|endpoint|form)s?\\b|" +
		"`[^`\\n]{1,64}`|'[A-Za-z_][\\w.-]{0,63}'|\"[A-Za-z_][\\w.-]{0,63}\"|\\bhere\\b|" +
		`\b(?:to|into|in|with)\s+(?:this|the|each|every|your)\s+(?:tool|function|call|request|invocation)\b|` +
		`\b(?:when|before|while|whenever|each\s+time|every\s+time|after)\s+(?:calling|invoking|using|you\s+(?:call|invoke|use))\s+(?:this|the|it)\b|` +
		`(?:https?:)?//\w`)
	// A word after a preposition, which is a destination when the tool's
	// input schema has a property of that name ("put it in notes").
	exfilPropRE = regexp.MustCompile(`(?i)\b(?:in|into|inside|within|as|to|under|for)\s+(?:the\s+)?([A-Za-z_][\w-]*)`)
)

// negated reports whether before, the words before a verb, negate it.
func negated(before string) bool {
	return exfilNotRE.MatchString(before) && !exfilNotNotRE.MatchString(before)
}

// sentenceWindow bounds how far (in bytes) from an object a sentence is
// read for its verb and destination.
const sentenceWindow = 200

// contextExfil returns where t tells the model to move the conversation,
// its system prompt or other tools' output into an argument or a URL
// (nil for nowhere): an object, a verb before it in its sentence, and a
// destination in its sentence — a text of the input schema is one (it
// describes an argument).
func (sc *scanner) contextExfil(t string, m hintMask) []int {
	var first []int
	for _, f := range exfilFamilies {
		if m&f.need != f.need {
			continue
		}
		for _, loc := range f.re.FindAllStringIndex(t, -1) {
			if first != nil && loc[0] >= first[0] {
				break
			}
			if sc.instructs(t, loc) {
				first = loc
				break
			}
		}
	}
	if first == nil {
		return nil
	}
	lo, hi := sentence(t, first)
	return []int{lo, hi}
}

// instructs reports whether the object at loc in t is one an instruction
// moves: not a name ("your conversation ID"), a verb before it in its
// sentence whose object it is, a destination in the sentence.
func (sc *scanner) instructs(t string, loc []int) bool {
	if exfilNotObjectRE.MatchString(t[loc[1]:min(loc[1]+40, len(t))]) {
		return false
	}
	lo, hi := sentence(t, loc)
	before, after := t[lo:loc[0]], t[loc[1]:hi]
	moved := false
	near := before[max(len(before)-100, 0):]
	for _, v := range exfilVerbRE.FindAllStringIndex(near, -1) {
		gap := near[v[1]:]
		if (exfilGapRE.MatchString(gap) || exfilFillRE.MatchString(gap) && sc.destination(gap)) && !negated(near[:v[0]]) {
			moved = true
			break
		}
	}
	return moved && (sc.inSchema || sc.destination(before) || sc.destination(after))
}

// destination reports whether s names where to put something: an
// argument, a URL, the tool's call, or a property of the input schema.
func (sc *scanner) destination(s string) bool {
	if exfilDestRE.MatchString(s) {
		return true
	}
	if sc.schema != nil && sc.params == nil {
		sc.params = schemaParams(sc.schema)
	}
	if len(sc.params) > 0 {
		for _, m := range exfilPropRE.FindAllStringSubmatch(s, -1) {
			if sc.params[strings.ToLower(m[1])] {
				return true
			}
		}
	}
	return false
}

// sentence returns the bounds of the sentence (or clause: a semicolon, a
// line break ends one too) around loc, at most sentenceWindow bytes each
// side.
func sentence(t string, loc []int) (lo, hi int) {
	lo = max(loc[0]-sentenceWindow, 0)
	for i := loc[0] - 1; i >= lo; i-- {
		if t[i] == '\n' || endsSentence(t, i) {
			lo = i + 1
			break
		}
	}
	hi = min(loc[1]+sentenceWindow, len(t))
	for i := loc[1]; i < hi; i++ {
		if t[i] == '\n' || endsSentence(t, i) {
			hi = i
			break
		}
	}
	return lo, hi
}

// endsSentence reports whether t[i] is a full stop, ! ? or ; followed by
// white space or the end (a dot in a URL or a name is not one).
func endsSentence(t string, i int) bool {
	switch t[i] {
	case '.', '!', '?', ';':
		return i+1 == len(t) || t[i+1] == ' ' || t[i+1] == '\t' || t[i+1] == '\n' || t[i+1] == '\r'
	}
	return false
}

// schemaParams returns the property names of a decoded input schema, in
// lower case, at any depth.
func schemaParams(v any) map[string]bool {
	out := map[string]bool{} // not nil: found
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if props, ok := x["properties"].(map[string]any); ok {
				for k := range props {
					out[strings.ToLower(k)] = true
				}
			}
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return out
}
