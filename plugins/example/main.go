// Command cronix-plugin-notify is an example third-party Cronix handler
// plugin, written only against the pluginapi SDK. Its "notify" handler
// POSTs a message to a Slack-compatible incoming webhook (Slack,
// Mattermost, Rocket.Chat, Discord's /slack endpoint, or anything that
// takes {"text": "..."}).
//
// Build it as its own binary and install it in a node's plugin directory:
//
//	go build -o cronix-plugin-notify ./plugins/example
//
// See docs/plugins.md for the walk-through.
package main

import "github.com/cronix/cronix/pluginapi"

func main() { pluginapi.Main(newNotifier(nil)) }
