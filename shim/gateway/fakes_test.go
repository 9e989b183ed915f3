package gateway_test

import "github.com/caduceus-dev/caduceus/shim/provider/providertest"

// The providers' fakes (shim/provider/providertest), as this package's
// tests name them.
type (
	geminiCall  = providertest.GeminiCall
	bedrockCall = providertest.BedrockCall
	azureCall   = providertest.AzureCall
	vertexCall  = providertest.VertexCall
)

var (
	fakeGemini      = providertest.Gemini
	fakeBedrock     = providertest.Bedrock
	fakeClaude      = providertest.Claude
	fakeAzure       = providertest.Azure
	fakeVertex      = providertest.Vertex
	fakeGoogleToken = providertest.GoogleToken
	serviceAccount  = providertest.ServiceAccount

	geminiSignature  = providertest.GeminiSignature
	claudeSignature  = providertest.ClaudeSignature
	bedrockSignature = providertest.BedrockSignature
)
