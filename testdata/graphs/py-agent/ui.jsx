// The generative UI of the "ui_card" graph (ui_graph.py), bundled by Slipway.
export default { card: (props) => <b className="card">{props.text}</b> };
