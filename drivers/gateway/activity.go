package gateway

// ActivityPath is the gateway's activity stamp (egress activity.go): an
// empty file whose modification time is the time of the last proxy
// request through the gateway, the Unix epoch before any. A gateway
// started with -state StatePath keeps it beside the report
// (egress.ActivityBeside); a gateway of a bottlefile before the stamp has
// none, and its agent's requests cannot be told.
const ActivityPath = "/tmp/bottlefile-gateway-activity"
