package shimgate

import (
	"net/http"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/server"
	"github.com/caduceus-dev/caduceus/shim/gateway"
	"github.com/caduceus-dev/caduceus/shim/upstream"
)

// modelsEpoch is the creation time shown for every model: the gateway does
// not know when a provider made a model, and the shapes require one.
var modelsEpoch = time.Unix(0, 0).UTC()

// shimModels answers GET /v1/models: the models the caller's key may use
// through the gateway, in the shape of the SDK asking — Anthropic's
// (anthropic-version header: its models) or OpenAI's (its models).
func (g *Gate) models(w http.ResponseWriter, r *http.Request, c *server.Call) error {
	c.Resource = "models"
	var models []gateway.Model
	if g.cfg.Gateway != nil { // without gateway routes no model is granted
		models = g.cfg.Gateway.Models(c.Caller)
	}
	if r.Header.Get("Anthropic-Version") != "" {
		data := modelsOf(models, upstream.KindAnthropic, anthropicModel)
		var first, last *string
		if len(data) > 0 {
			first, last = &data[0].ID, &data[len(data)-1].ID
		}
		return server.WriteJSON(w, http.StatusOK, map[string]any{"data": data, "has_more": false, "first_id": first, "last_id": last})
	}
	return server.WriteJSON(w, http.StatusOK, map[string]any{"object": "list", "data": modelsOf(models, upstream.KindOpenAI, openAIModel)})
}

// model answers GET /v1/models/{id}: one model the caller's key may use, in
// the shape of the SDK asking; any other id (not routed, or not granted to
// this key) is a 404 model_not_found, as the providers answer an unknown
// model.
func (g *Gate) model(w http.ResponseWriter, r *http.Request, c *server.Call) error {
	id := r.PathValue("id")
	c.Resource = "models/" + server.Clip(id, 100)
	kind := upstream.KindOpenAI
	if r.Header.Get("Anthropic-Version") != "" {
		kind = upstream.KindAnthropic
	}
	if g.cfg.Gateway != nil {
		for _, m := range g.cfg.Gateway.Models(c.Caller) {
			if m.ID != id || !m.Serves(kind) {
				continue
			}
			if kind == upstream.KindAnthropic {
				return server.WriteJSON(w, http.StatusOK, anthropicModel(m))
			}
			return server.WriteJSON(w, http.StatusOK, openAIModel(m))
		}
	}
	return contract.NotFoundf(gateway.CodeModelNotRouted, "the model %q does not exist or this key may not use it", id)
}

// anthropicModelShape and openAIModelShape are a model as each SDK reads it.
type anthropicModelShape struct {
	Type        string `json:"type"`
	ID          string `json:"id"`
	DisplayName string `json:"display_name"`
	CreatedAt   string `json:"created_at"`
}

type openAIModelShape struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

func anthropicModel(m gateway.Model) anthropicModelShape {
	return anthropicModelShape{Type: "model", ID: m.ID, DisplayName: m.ID, CreatedAt: modelsEpoch.Format(time.RFC3339)}
}

func openAIModel(m gateway.Model) openAIModelShape {
	return openAIModelShape{ID: m.ID, Object: "model", Created: modelsEpoch.Unix(), OwnedBy: m.OwnedBy}
}

// modelsOf lists the models served over kind in an SDK's shape (never nil:
// the list is an array even when empty).
func modelsOf[T any](models []gateway.Model, kind upstream.Kind, shape func(gateway.Model) T) []T {
	out := []T{}
	for _, m := range models {
		if m.Serves(kind) {
			out = append(out, shape(m))
		}
	}
	return out
}
