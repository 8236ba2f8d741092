package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/gateway/bridge"
	"github.com/toolgate/toolgate/gateway/config"
)

func init() { register(newConnectCmd) }

type connectFlags struct {
	addr    string
	config  string
	profile string
}

func newConnectCmd(g *globals) *cobra.Command {
	var f connectFlags
	cmd := &cobra.Command{
		Use:   "connect [--addr 127.0.0.1:8931] [--profile NAME]",
		Short: "Connect an MCP client on stdio to a gateway running over HTTP (one gateway for many clients)",
		Long: `Connect an MCP client that speaks only stdio to a gateway served over
streamable HTTP (toolgate serve --http), as if it were a gateway of its own:
point the client's config at "toolgate connect" instead of "toolgate serve".
Every client then shares one gateway: one set of backend processes, one
embedding model in memory, one index, its API keys and scopes, its audit log
and what it learns from use, instead of a gateway per client session.

It relays the client's JSON-RPC messages to the gateway's /mcp (or
/profiles/NAME/mcp with --profile) and the answers back, with the progress,
log messages and questions the gateway sends during a call. The gateway's
HTTP front keeps no session: a gateway restarted while clients are connected
answers their next call. A call it cannot take (it is down, it refuses the
key) is answered with an error that says why and how to fix it.

The gateway: --addr (host:port or URL), else --config's toolgate.http.addr,
else the one gateway serving HTTP on the data folder (found as toolgate
status finds it), else ` + defaultStatusAddr + `.
A gateway with API keys needs one: put it in $` + envKey + `.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			u, err := bridgeURL(cmd.Context(), g, f)
			if err != nil {
				return err
			}
			key := os.Getenv(envKey)
			g.logger.Info("relaying the stdio client to the gateway", "url", u, "api_key", key != "")
			err = bridge.Run(cmd.Context(), cmd.InOrStdin(), cmd.OutOrStdout(), bridge.Options{
				URL: u, Key: key, KeyEnv: "$" + envKey, Logger: g.logger,
			})
			if cmd.Context().Err() != nil {
				return nil // a signal: the stop's exit status says it
			}
			return err
		},
	}
	cmd.Flags().StringVar(&f.addr, "addr", "", "gateway address host:port or URL (default: the gateway serving HTTP on the data folder, else "+defaultStatusAddr+")")
	cmd.Flags().StringVarP(&f.config, "config", "c", "", "take the address from this config's toolgate.http.addr, and the data folder from its dataDir")
	cmd.Flags().StringVar(&f.profile, "profile", "", "connect to this profile of the gateway's toolgate.profiles (/profiles/NAME/mcp)")
	return cmd
}

// bridgeURL is the MCP endpoint connect relays to (see its help).
func bridgeURL(ctx context.Context, g *globals, f connectFlags) (string, error) {
	addr := f.addr
	if addr == "" && f.config != "" {
		cfg, err := config.Load(f.config)
		if err != nil {
			return "", err
		}
		g.applyConfig(cfg.Toolgate)
		addr = cfg.Toolgate.HTTP.Addr
	}
	if addr == "" {
		var found []string
		for _, gw := range localGateways(ctx, g.DataDir(), 5*time.Second) {
			if p := gw.rep.Process; gw.err == nil && p != nil && p.Transport == "http" && p.Addr != "" {
				found = append(found, fmt.Sprintf("pid %d at %s", p.PID, p.Addr))
				addr = p.Addr
			}
		}
		if len(found) > 1 {
			return "", usageError{fmt.Errorf("several gateways serve HTTP on the data folder %s (%s): choose one with --addr", g.DataDir(), strings.Join(found, ", "))}
		}
		if addr == "" {
			addr = defaultStatusAddr
		}
	}
	u, err := gatewayURL(addr)
	if err != nil {
		return "", usageError{err}
	}
	path := strings.TrimSuffix(u.Path, "/")
	switch {
	case f.profile != "" && path != "" && path != "/mcp":
		return "", usageError{fmt.Errorf("--profile %s with --addr %s: give the gateway's address without a path (the profile's is /profiles/%s/mcp)", f.profile, addr, f.profile)}
	case f.profile != "":
		u.Path = "/profiles/" + url.PathEscape(f.profile) + "/mcp"
	case path == "":
		u.Path = "/mcp"
	}
	return u.String(), nil
}
