package drivers

// EngineNamer is implemented by drivers that name an object on the engine
// ahead of creating it, so that the intent recorded before the create
// (state.Intent) says what will appear there.
type EngineNamer interface {
	EngineName(lineage string, o Object) string
}
