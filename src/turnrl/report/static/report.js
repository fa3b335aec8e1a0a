/* turnrl report: the trajectory browser (plots.js draws the figures).
 * Data: #report-data (figures, palettes, per run: the browser's index, groups, vocabulary and
 * colour scales); each embedded episode is its own #ep-<run>-<step>-<i> JSON element, parsed
 * when it is opened. Token colours are palette bins computed by turnrl (one character per
 * token per mode, "-" for none); this script only looks them up. */
(function () {
  "use strict";
  const DATA = JSON.parse(document.getElementById("report-data").textContent);
  const MODE_LABELS = {
    mask: "loss mask", advantage: "advantage", logprob: "sampling log-prob",
    entropy: "entropy", logprob_diff: "|Δ log-prob| sampler vs learner",
  };
  const VALUE_LABELS = {advantage: "advantage", logprob: "log-prob", entropy: "entropy",
                        logprob_diff: "|Δ log-prob|"};
  const FILTERS = {
    all: () => true, success: (r) => r.success, failure: (r) => !r.success,
    positive: (r) => r.reward > 0, nonpositive: (r) => r.reward <= 0,
    error: (r) => !!r.error, truncated: (r) => r.truncated,
  };
  const state = {run: 0, step: null, filter: "all", row: null, mode: "advantage"};

  function h(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value);
    }
    for (const child of children) if (child !== null && child !== undefined) node.append(child);
    return node;
  }
  function fmt(value, digits) {
    if (value === null || value === undefined) return "—";
    const d = digits === undefined ? 3 : digits;
    const text = Number(value).toFixed(d);
    return value > 0 && digits === -1 ? "+" + text : text;
  }
  function signed(value, digits) {
    if (value === null || value === undefined) return "—";
    return (value > 0 ? "+" : "") + Number(value).toFixed(digits === undefined ? 3 : digits);
  }

  // ------------------------------------------------------------------ the browser
  function browser() { return DATA.runs[state.run].browser; }

  function setupControls() {
    const runSelect = document.getElementById("run-select");
    DATA.runs.forEach((run, i) => runSelect.append(h("option", {value: String(i), text: run.name})));
    if (DATA.runs.length < 2) runSelect.parentElement.style.display = "none";
    runSelect.addEventListener("change", () => {
      state.run = Number(runSelect.value); state.step = null; state.row = null; fillSteps();
    });
    document.getElementById("step-select").addEventListener("change", (event) => {
      state.step = Number(event.target.value); renderList();
    });
    document.getElementById("filter-select").addEventListener("change", (event) => {
      state.filter = event.target.value; renderList();
    });
    fillSteps();
  }

  function fillSteps() {
    const b = browser();
    const select = document.getElementById("step-select");
    select.replaceChildren();
    for (const step of b.steps) select.append(h("option", {value: String(step), text: "step " + step}));
    if (state.step === null && b.steps.length) state.step = b.steps[b.steps.length - 1];
    if (state.step !== null) select.value = String(state.step);
    const note = document.getElementById("browser-note");
    if (!b.steps.length) note.textContent = "This run kept no samples (train.save_samples is 0).";
    else if (b.all_steps > b.steps.length) {
      note.textContent = b.steps.length + " of " + b.all_steps +
        " sampled steps are embedded (spread over the run).";
    } else note.textContent = "";
    renderList();
  }

  function renderList() {
    const body = document.querySelector("#episode-list tbody");
    body.replaceChildren();
    const rows = browser().index.filter((r) => r.step === state.step && FILTERS[state.filter](r));
    for (const r of rows) {
      const flags = h("td", {},
        h("span", {class: "flag " + (r.success ? "ok" : "bad"), title: r.success ? "success" : "failure",
                   text: r.success ? "✓" : "✗"}));
      if (r.truncated) flags.append(h("span", {class: "flag warn", title: "truncated", text: "trunc"}));
      if (r.error) flags.append(h("span", {class: "flag bad", title: r.error, text: "error"}));
      const tr = h("tr", {"data-step": String(r.step), "data-i": String(r.i),
                          onclick: () => openEpisode(r.step, r.i)},
        h("td", {text: String(r.i)}), h("td", {text: String(r.group)}),
        h("td", {class: "num", text: fmt(r.reward, 2)}), h("td", {class: "num", text: String(r.turns)}),
        h("td", {class: "num", text: String(r.sampled)}), flags);
      if (state.row && state.row.step === r.step && state.row.i === r.i) tr.classList.add("selected");
      body.append(tr);
    }
    if (!rows.length) body.append(h("tr", {}, h("td", {colspan: "6", class: "muted", text: "No episode matches."})));
  }

  function load(step, i) {
    const node = document.getElementById("ep-" + state.run + "-" + step + "-" + i);
    return node ? JSON.parse(node.textContent) : null;
  }

  function openEpisode(step, i) {
    const episode = load(step, i);
    if (!episode) return;
    state.row = {step: step, i: i};
    document.querySelectorAll("#episode-list tbody tr").forEach((tr) => {
      tr.classList.toggle("selected", Number(tr.dataset.step) === step && Number(tr.dataset.i) === i);
    });
    const box = document.getElementById("episode");
    box.replaceChildren(
      h("h3", {text: "Step " + episode.step + ", episode " + episode.i + " (group " + episode.group +
               ", seed " + episode.seed + ", " + episode.env_id + ")"}),
      h("p", {class: "outcome"},
        "Reward " + fmt(episode.reward, 3) + " · " + (episode.success ? "success" : "failure") +
        " · " + episode.turns + " turns · " + episode.sampled + " sampled tokens" +
        (episode.truncated ? " · truncated" : "") + (episode.terminated ? " · terminated" : "")),
    );
    if (episode.error) box.append(h("p", {class: "flag bad", text: "env error: " + episode.error}));
    if (episode.reward_terms) box.append(h("p", {class: "muted", text: "reward terms: " + JSON.stringify(episode.reward_terms)}));
    box.append(h("div", {class: "episode-body"},
                 h("div", {}, h("h4", {text: "Conversation"}), conversation(episode)),
                 h("div", {}, h("h4", {text: "Tokens"}), tokenView(episode))));
    box.append(h("h4", {text: "Its group (same task, same step)"}), groupView(episode));
  }

  function turnBadge(turn, k) {
    if (!turn) return null;
    let text = "turn " + k + " · reward " + fmt(turn.reward, 3);
    if (turn.env_reward !== null && turn.env_reward !== undefined && turn.env_reward !== turn.reward) {
      text += " (env " + fmt(turn.env_reward, 3) + ")";
    }
    text += " · mean advantage " + signed(turn.advantage) + " over " + turn.tokens + " tokens";
    return h("span", {class: "turn-badge", "data-turn": String(k), text: text});
  }

  function withCalls(text, calls) {
    // highlight each tool call's span (indices count code points, as Python's do)
    const chars = Array.from(text);
    const out = h("span");
    let at = 0;
    for (const call of calls) {
      if (call.start == null) continue;  // an API call: not in the text
      out.append(chars.slice(at, call.start).join(""));
      out.append(h("span", {class: "call", text: chars.slice(call.start, call.end).join("")}));
      at = call.end;
    }
    out.append(chars.slice(at).join(""));
    return out;
  }

  function conversation(episode) {
    const list = h("div", {class: "conversation"});
    let k = 0;
    for (const message of episode.messages) {
      const role = h("span", {class: "role", text: message.role});
      const box = h("div", {class: "msg " + message.role}, role);
      if (message.role === "assistant") {
        role.append(turnBadge(episode.turn_rewards[k], k));
        const calls = message.calls || [];
        box.append(withCalls(String(message.content), calls));
        if (calls.length) {
          box.append(h("div", {class: "calls", text: calls.map((c) =>
            c.problem ? "✗ " + (c.name || "call") + ": " + c.problem
                      : "→ " + c.name + "(" + JSON.stringify(c.arguments) + ")").join("  ")}));
        }
        k += 1;
      } else {
        box.append(String(message.content));
      }
      list.append(box);
    }
    return list;
  }

  function legend(mode) {
    const b = browser();
    const palette = DATA.palettes[mode];
    const row = h("div", {class: "legend", "data-mode": mode});
    if (mode === "mask") {
      row.append(h("span", {class: "swatch", style: "background:" + palette[0]}), " sampled by the policy (trained on)  ",
                 h("span", {class: "swatch", style: "background:#fff"}), " prompt and observations (not trained on)");
      return row;
    }
    const scale = b.scales[mode];
    const [left, right] = scale.reverse ? [scale.hi, scale.lo] : [scale.lo, scale.hi];
    row.append(fmt(left, 2) + " ");
    palette.forEach((color) => row.append(h("span", {class: "swatch", style: "background:" + color})));
    row.append(" " + fmt(right, 2) + "  (" + MODE_LABELS[mode] + "; only sampled tokens are coloured)");
    return row;
  }

  function tooltip(episode, t, j, text) {
    // j: the token's place among the sampled tokens (values hold only theirs), -1 if not sampled
    const parts = [JSON.stringify(text), "id " + episode.token_ids[t], "turn " + episode.turn_index[t],
                   "mask " + (j >= 0 ? 1 : 0)];
    for (const [mode, label] of Object.entries(VALUE_LABELS)) {
      if (episode.values[mode] && j >= 0) parts.push(label + " " + Number(episode.values[mode][j]).toPrecision(4));
    }
    return parts.join(" · ");
  }

  function dark(hex) {  // white text on dark bins (relative luminance below 0.4)
    const [r, g, b] = [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16) / 255);
    return 0.2126 * r + 0.7152 * g + 0.0722 * b < 0.4;
  }

  function paint(episode, box) {
    const vocab = browser().vocab;
    const codes = episode.codes[state.mode];
    const palette = DATA.palettes[state.mode];
    const fragment = document.createDocumentFragment();
    const sampled = episode.codes.mask;
    let j = -1;
    for (let t = 0; t < episode.token_ids.length; t++) {
      const isSampled = sampled[t] !== "-";
      if (isSampled) j += 1;
      const id = episode.token_ids[t];
      const text = vocab[id] !== undefined ? vocab[id] : "⟨" + id + "⟩";
      const span = document.createElement("span");
      span.className = "tok";
      span.dataset.t = String(t);
      span.textContent = text.replace(/\n/g, "↵\n");
      const code = codes[t];
      if (code !== "-") {
        span.style.backgroundColor = palette[Number(code)];
        if (dark(palette[Number(code)])) span.style.color = "#fff";
      }
      span.title = tooltip(episode, t, isSampled ? j : -1, text);
      fragment.append(span);
    }
    box.replaceChildren(fragment);
  }

  function tokenView(episode) {
    const modes = Object.keys(DATA.palettes).filter((m) => episode.codes[m] !== undefined);
    if (!modes.includes(state.mode)) state.mode = modes.includes("advantage") ? "advantage" : modes[0];
    const wrap = h("div");
    const bar = h("div", {class: "modes"}, "Colour by: ");
    const legendBox = h("div");
    const tokens = h("div", {class: "tokens"});
    const redraw = () => {
      bar.querySelectorAll("button").forEach((b) => b.classList.toggle("active", b.dataset.mode === state.mode));
      legendBox.replaceChildren(legend(state.mode));
      paint(episode, tokens);
    };
    for (const mode of modes) {
      bar.append(h("button", {"data-mode": mode, text: MODE_LABELS[mode],
                              onclick: () => { state.mode = mode; redraw(); }}), " ");
    }
    wrap.append(bar, legendBox, tokens);
    redraw();
    return wrap;
  }

  function groupView(episode) {
    const members = browser().groups[episode.step + ":" + episode.group] || [episode.i];
    const row = h("div", {class: "group"});
    for (const i of members) {
      const member = i === episode.i ? episode : load(episode.step, i);
      if (!member) continue;
      const card = h("div", {class: "member" + (i === episode.i ? " current" : ""), "data-i": String(i),
                             onclick: () => openEpisode(episode.step, i)},
        h("b", {text: "#" + i}), " reward " + fmt(member.reward, 2) + " " + (member.success ? "✓" : "✗"));
      let k = 0;
      for (const message of member.messages) {
        if (message.role !== "assistant") continue;
        const turn = member.turn_rewards[k] || {};
        card.append(h("div", {class: "reply", text: k + ": " + message.content}),
                    h("div", {class: "muted", text: "r " + fmt(turn.reward, 2) + " · Â " + signed(turn.advantage)}));
        k += 1;
      }
      row.append(card);
    }
    return row;
  }

  setupControls();
  window.turnrlReport = {openEpisode: openEpisode, state: state};
})();
