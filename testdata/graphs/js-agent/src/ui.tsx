// The generative UI of the "weather" graph: bundled by Slipway (esbuild's
// Go library), loaded by the SDK's LoadExternalComponent.
import "./ui.css";

const Weather = (props: { city: string }) => <div className="weather">Weather in {props.city}</div>;

export default { weather: Weather };
