// The dashboard's one script: a small single-page app over the service's own routes. No framework, no build step,
// no request to any other host (the page's Content-Security-Policy forbids it).
/* global document, window, fetch, Blob, URL, FileReader, sessionStorage */

const $ = (sel) => document.querySelector(sel)
const state = { session: null, page: 'lookup', bulkRows: [], sort: { key: 'score', dir: -1 }, historyCursor: null, verdict: null, allowCursor: null, feedbackCursor: null, retroCursor: null }
const kSvg = 'http://www.w3.org/2000/svg'

function showError (message) {
  const el = $('#error')
  el.textContent = message
  el.hidden = message === ''
}

/** Calls the service; throws with the error body's message. State-changing calls carry the CSRF token. */
async function api (method, path, body) {
  const headers = { accept: 'application/json' }
  if (body !== undefined) headers['content-type'] = 'application/json'
  if (method !== 'GET' && state.session !== null) headers['x-csrf-token'] = state.session.csrf
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: 'same-origin' })
  const data = res.headers.get('content-type')?.includes('json') ? await res.json() : await res.text()
  if (!res.ok) {
    // The page sends no API key: a 401 without a cookie (MISSING_API_KEY) means the session is gone too (signed out
    // in another tab, or the cookie's Max-Age passed).
    if (res.status === 401 && (data?.code === 'SESSION_EXPIRED' || data?.code === 'MISSING_API_KEY')) signedOut()
    const err = new Error(data?.message ?? `${res.status}`)
    err.status = res.status
    err.code = data?.code
    throw err
  }
  return data
}

// Bidirectional controls in a value, label, reason or note would reorder the text shown after them (a feed label
// "\u202Egnp.exe" reads as "exe.png"), so every text the page shows writes them as their code point instead.
const kBidiControls = /[\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/g

/** Text as the page shows it: bidirectional controls made visible as [U+XXXX]. */
function shown (text) {
  return String(text ?? '').replace(kBidiControls, (c) => `[U+${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}]`)
}

function el (tag, attrs = {}, ...children) {
  const node = document.createElement(tag)
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v)
  for (const c of children) node.append(c instanceof window.Node ? c : document.createTextNode(shown(c)))
  return node
}

function svg (tag, attrs = {}, text) {
  const node = document.createElementNS(kSvg, tag)
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v))
  if (text !== undefined) node.textContent = shown(text)
  return node
}

// ---- navigation and session ----------------------------------------------------------------------------------

function show (page) {
  state.page = page
  for (const s of document.querySelectorAll('main > section')) s.hidden = s.id !== `page-${page}`
  for (const b of document.querySelectorAll('#nav button')) {
    if (b.dataset.page === page) b.setAttribute('aria-current', 'page')
    else b.removeAttribute('aria-current')
  }
  showError('')
  if (page === 'usage') loadUsage().catch((e) => showError(e.message))
  if (page === 'intel') loadIntel().catch((e) => showError(e.message))
  if (page === 'capacity') loadCapacity().catch((e) => showError(e.message))
  // Read again on every visit: a lookup or bulk since the last one added records.
  if (page === 'history') searchHistory(false).catch((e) => showError(e.message))
  if (page === 'allowlist') loadAllowlist(false).catch((e) => showError(e.message))
  if (page === 'feedback') Promise.all([loadSummary(), loadFeedback(false)]).catch((e) => showError(e.message))
  if (page === 'retro') loadRetroHits(false).catch((e) => showError(e.message))
}

function signedIn (session) {
  state.session = session
  sessionStorage.setItem('iocv-signed-in', '1')
  $('#nav').hidden = false
  $('#who').hidden = false
  $('#who-name').textContent = `${session.username} (${session.tenant}, ${session.role})`
  $('#intel-reload').hidden = !session.permissions.includes('admin')
  show('lookup')
  $('#indicator').focus()
}

function signedOut () {
  state.session = null
  state.verdict = null
  // Nothing of the previous user's tenant stays on a page the next user could open.
  for (const id of ['#history-table', '#allow-table', '#fbl-table', '#summary-table', '#bulk-table', '#retro-table']) $(`${id} tbody`).replaceChildren()
  for (const id of ['#lookup-result', '#bulk-result']) $(id).hidden = true
  sessionStorage.removeItem('iocv-signed-in')
  $('#nav').hidden = true
  $('#who').hidden = true
  for (const s of document.querySelectorAll('main > section')) s.hidden = s.id !== 'page-signin'
  $('#username').focus()
}

$('#signin-form').addEventListener('submit', async (ev) => {
  ev.preventDefault()
  showError('')
  try {
    signedIn(await api('POST', '/dashboard/api/session', { username: $('#username').value, password: $('#password').value }))
    $('#password').value = ''
  } catch (e) {
    showError(e.message)
  }
})

$('#sign-out').addEventListener('click', async () => {
  try { await api('DELETE', '/dashboard/api/session') } catch {}
  signedOut()
})

for (const b of document.querySelectorAll('#nav button')) b.addEventListener('click', () => show(b.dataset.page))

// ---- lookup ----------------------------------------------------------------------------------------------------

/** The score's steps: neutral 50, each signal's signed contribution, the clamp to 0-100, the rounded score. */
export function waterfallSteps (verdict) {
  const steps = [{ label: 'neutral', value: 50, kind: 'neutral' }]
  let total = 50
  for (const s of verdict.signals) {
    const c = s.evidence?.contribution ?? 0
    total += c
    steps.push({ label: s.signal_name, value: c, kind: s.direction === 'safe' ? 'safe' : 'malicious', id: s.signal_id })
  }
  return { steps, total, score: verdict.risk.score }
}

function drawWaterfall (verdict) {
  const { steps, total, score } = waterfallSteps(verdict)
  const rowH = 24
  const width = 760
  const left = 300
  const scale = (width - left - 60) / 100
  const root = svg('svg', { width, height: (steps.length + 1) * rowH + 30, viewBox: `0 0 ${width} ${(steps.length + 1) * rowH + 30}`, 'data-final': score })
  for (const x of [0, 50, 100]) {
    root.append(svg('line', { x1: left + x * scale, x2: left + x * scale, y1: 0, y2: (steps.length + 1) * rowH, stroke: '#c5ccd3', 'stroke-dasharray': x === 50 ? '4 3' : '' }))
    root.append(svg('text', { x: left + x * scale - 6, y: (steps.length + 1) * rowH + 16 }, x))
  }
  let at = 0
  steps.forEach((s, i) => {
    const y = i * rowH + 4
    const from = i === 0 ? 0 : at
    const to = i === 0 ? 50 : at + s.value
    at = to
    const x0 = left + Math.max(0, Math.min(100, Math.min(from, to))) * scale
    const x1 = left + Math.max(0, Math.min(100, Math.max(from, to))) * scale
    const g = svg('g', { 'data-step': i === 0 ? 'start' : 'signal', 'data-value': s.value })
    g.append(svg('text', { x: 4, y: y + 13 }, `${s.label.slice(0, 42)}${s.label.length > 42 ? '…' : ''}`))
    g.append(svg('rect', { x: x0, y, width: Math.max(1.5, x1 - x0), height: rowH - 8, class: s.kind }))
    g.append(svg('text', { x: x1 + 4, y: y + 13 }, i === 0 ? '50' : `${s.value > 0 ? '+' : ''}${s.value}`))
    root.append(g)
  })
  const y = steps.length * rowH + 4
  const fin = svg('g', { 'data-step': 'final' })
  fin.append(svg('text', { x: 4, y: y + 13 }, total < 0 || total > 100 ? 'score (clamped to 0-100)' : 'score'))
  fin.append(svg('rect', { x: left, y, width: Math.max(1.5, score * scale), height: rowH - 8, class: 'final' }))
  fin.append(svg('text', { x: left + score * scale + 4, y: y + 13 }, score))
  root.append(fin)
  $('#waterfall').replaceChildren(root)
  const parts = steps.slice(1).map((s) => `${s.value >= 0 ? '+' : '−'} ${Math.abs(s.value)} (${s.label})`)
  $('#waterfall-text').textContent = `50 ${parts.join(' ')} = ${Math.round(total * 100) / 100}${total < 0 || total > 100 ? ', clamped' : ''}, shown as ${score}.`
}

function renderVerdict (v) {
  $('#v-score').textContent = v.risk.score
  $('#v-strength').textContent = v.risk.strength
  $('#v-category').textContent = v.risk.category
  $('#v-saturation').textContent = v.risk.evidence_saturation
  $('#v-indicator').textContent = shown(`${v.indicator.normalized} (${v.indicator.type})`)
  drawWaterfall(v)
  const body = $('#evidence tbody')
  body.replaceChildren(...v.signals.map((s) => el('tr', {},
    el('td', {}, s.signal_name), el('td', {}, s.direction), el('td', {}, s.evidence?.source ?? ''), el('td', {}, `${s.evidence?.match ?? ''} ${s.evidence?.matched ?? ''}`),
    el('td', {}, s.evidence?.age_days ?? ''), el('td', {}, s.evidence?.decay ?? ''), el('td', {}, s.evidence?.contribution ?? ''))))
  const ctx = $('#context')
  ctx.replaceChildren()
  for (const [k, val] of Object.entries(v.threat_context)) {
    if (val === null || (Array.isArray(val) && val.length === 0)) continue
    ctx.append(el('dt', {}, k.replace(/_/g, ' ')), el('dd', {}, Array.isArray(val) ? val.join(', ') : typeof val === 'object' ? JSON.stringify(val) : val))
  }
  $('#actions').replaceChildren(...v.recommended_actions.map((a) => el('li', {}, a.action)))
  $('#warnings').textContent = v.meta.warnings.length > 0 ? shown(`Notes: ${v.meta.warnings.join('; ')}`) : ''
  state.verdict = v
  // Names the answer shown (tests and scripts wait for it).
  $('#lookup-result').dataset.requestId = v.meta.request_id
  $('#fb-note').value = ''
  $('#fb-status').textContent = ''
  $('#offer-form').hidden = true
  $('#lookup-result').hidden = false
}

$('#lookup-form').addEventListener('submit', async (ev) => {
  ev.preventDefault()
  showError('')
  try {
    renderVerdict(await api('POST', '/dashboard/api/lookup', { value: $('#indicator').value.trim() }))
  } catch (e) {
    $('#lookup-result').hidden = true
    showError(e.message)
  }
})

// ---- feedback from the lookup, and the allowlist offer ---------------------------------------------------------

/** The allowlist entries a verdict's indicator can become: [kind, label, value]. */
function offers (ind) {
  const n = ind.normalized
  switch (ind.type) {
    case 'domain': return [['domain_suffix', 'this domain and its subdomains', n], ['domain', 'this domain only', n]]
    case 'ip': return [['ip', 'this address', n], ['ip_block', 'its network (CIDR block)', n.includes(':') ? `${n}/64` : `${n}/24`]]
    default: return [[ind.type, `this ${ind.type === 'ip_block' ? 'block' : ind.type === 'asn' ? 'AS number' : 'hash'}`, n]]
  }
}

async function markVerdict (verdict) {
  const v = state.verdict
  if (v === null) return
  showError('')
  const note = $('#fb-note').value.trim()
  try {
    const e = await api('POST', '/api/v2/mgmt/feedback', { indicator: { value: v.indicator.value, type: v.indicator.type }, verdict, note })
    $('#fb-status').textContent = `Recorded as a ${verdict === 'false_positive' ? 'false' : 'true'} positive (score ${e.score}, ${e.signal_ids.length} signals). The team sees it on the Feedback page.`
    if (verdict === 'false_positive' && v.risk.category !== 'allowlisted') {
      const kind = $('#offer-kind')
      kind.replaceChildren(...offers(v.indicator).map(([k, label, value]) => el('option', { value: k, 'data-value': value }, label)))
      $('#offer-value').value = kind.options[0].dataset.value
      $('#offer-reason').value = note === '' ? 'false positive' : `false positive: ${note}`.slice(0, 500)
      $('#offer-expires').value = ''
      $('#offer-form').hidden = false
      kind.focus()
    }
  } catch (e) {
    showError(e.message)
  }
}

$('#mark-fp').addEventListener('click', () => markVerdict('false_positive'))
$('#mark-tp').addEventListener('click', () => markVerdict('true_positive'))
$('#offer-kind').addEventListener('change', () => { $('#offer-value').value = $('#offer-kind').selectedOptions[0]?.dataset.value ?? '' })
$('#offer-skip').addEventListener('click', () => {
  $('#offer-form').hidden = true
  $('#mark-fp').focus()
})

/** An allowlist entry's body from a kind, value, reason and an optional UTC date (the entry expires as that day begins). */
function allowBody (kind, value, reason, date) {
  return { kind, value: value.trim(), reason: reason.trim(), ...(date === '' ? {} : { expires_at: `${date}T00:00:00Z` }) }
}

$('#offer-form').addEventListener('submit', async (ev) => {
  ev.preventDefault()
  showError('')
  try {
    const e = await api('POST', '/api/v2/mgmt/allowlist', allowBody($('#offer-kind').value, $('#offer-value').value, $('#offer-reason').value, $('#offer-expires').value))
    $('#offer-form').hidden = true
    $('#fb-status').textContent = `Added to the allowlist as ${kKindNames[e.kind] ?? e.kind} ${e.value} (${e.id}); the next lookup is allowlisted. Manage entries on the Allowlist page.`
    $('#indicator').focus()
  } catch (e) {
    showError(e.message)
  }
})

// ---- allowlist page --------------------------------------------------------------------------------------------

const kKindNames = { ip: 'IP address', domain: 'domain', domain_suffix: 'domain and subdomains', ip_block: 'CIDR block', asn: 'AS number', file_hash_sha256: 'SHA-256' }

async function loadAllowlist (more) {
  const q = new URLSearchParams({ limit: '100' })
  if (more && state.allowCursor !== null) q.set('cursor', state.allowCursor)
  const page = await api('GET', `/api/v2/mgmt/allowlist?${q}`)
  state.allowCursor = page.next_cursor
  const now = Date.now()
  const rows = page.entries.map((e) => {
    const expired = e.expires_at !== null && Date.parse(e.expires_at) <= now
    const remove = el('button', { type: 'button', 'aria-label': `Remove ${e.value}` }, 'Remove')
    remove.addEventListener('click', () => removeAllowEntry(e, remove))
    return el('tr', { 'data-id': e.id }, el('td', {}, kKindNames[e.kind] ?? e.kind), el('td', {}, e.value), el('td', {}, e.reason), el('td', {}, e.created_by),
      el('td', {}, e.created_at.slice(0, 16).replace('T', ' ')), el('td', expired ? { class: 'expired' } : {}, e.expires_at === null ? 'never' : `${e.expires_at.slice(0, 16).replace('T', ' ')}${expired ? ' (expired)' : ''}`),
      el('td', {}, remove))
  })
  if (more) $('#allow-table tbody').append(...rows)
  else $('#allow-table tbody').replaceChildren(...rows)
  $('#allow-empty').hidden = $('#allow-table tbody').children.length > 0
  $('#allow-next').hidden = page.next_cursor === null
}

async function removeAllowEntry (e, button) {
  showError('')
  try {
    await api('DELETE', `/api/v2/mgmt/allowlist/${encodeURIComponent(e.id)}`)
    const row = button.closest('tr')
    const next = row.nextElementSibling ?? row.previousElementSibling
    row.remove()
    $('#allow-empty').hidden = $('#allow-table tbody').children.length > 0
    $('#allow-status').textContent = `Removed ${e.value}; the next lookup no longer sees it.`
    // Keep keyboard focus in the table rather than losing it with the removed button.
    ;(next?.querySelector('button') ?? $('#al-value')).focus()
  } catch (err) {
    showError(err.message)
  }
}

$('#allow-form').addEventListener('submit', async (ev) => {
  ev.preventDefault()
  showError('')
  try {
    const e = await api('POST', '/api/v2/mgmt/allowlist', allowBody($('#al-kind').value, $('#al-value').value, $('#al-reason').value, $('#al-expires').value))
    $('#al-value').value = ''
    $('#al-reason').value = ''
    $('#al-expires').value = ''
    await loadAllowlist(false)
    // Announced once the list shows the new entry, so what the status says is on the page.
    $('#allow-status').textContent = `Added ${e.value} (${kKindNames[e.kind] ?? e.kind}).`
  } catch (err) {
    showError(err.message)
  }
})
$('#allow-next').addEventListener('click', () => loadAllowlist(true).catch((e) => showError(e.message)))

// ---- feedback page ---------------------------------------------------------------------------------------------

async function loadSummary () {
  const q = new URLSearchParams()
  if ($('#sum-from').value !== '') q.set('since', $('#sum-from').value)
  if ($('#sum-to').value !== '') q.set('until', $('#sum-to').value)
  const s = await api('GET', `/api/v2/mgmt/feedback/summary?${q}`)
  $('#summary-totals').textContent = `${s.totals.false_positive} false positives and ${s.totals.true_positive} true positives recorded${s.since === null ? '' : ` since ${s.since.slice(0, 10)}`}${s.until === null ? '' : ` before ${s.until.slice(0, 10)}`}. An entry counts once for each signal its verdict had.`
  $('#summary-table tbody').replaceChildren(...s.signals.map((r) => el('tr', {},
    el('td', {}, r.signal_id), el('td', {}, r.false_positive), el('td', {}, r.true_positive),
    el('td', {}, el('meter', { min: '0', max: '1', low: '0.2', high: '0.5', optimum: '0', value: String(r.false_positive_share), 'aria-label': `false-positive share of ${r.signal_id}` }), `${Math.round(r.false_positive_share * 100)}%`))))
}

function mayDelete (entry) {
  return state.session.permissions.includes('admin') || entry.created_by === `user:${state.session.username}`
}

async function loadFeedback (more) {
  const q = new URLSearchParams({ limit: '50' })
  if ($('#fbl-verdict').value !== '') q.set('verdict', $('#fbl-verdict').value)
  if ($('#fbl-indicator').value.trim() !== '') q.set('indicator', $('#fbl-indicator').value.trim())
  if ($('#fbl-signal').value.trim() !== '') q.set('signal_id', $('#fbl-signal').value.trim())
  if ($('#fbl-from').value !== '') q.set('since', $('#fbl-from').value)
  if ($('#fbl-to').value !== '') q.set('until', $('#fbl-to').value)
  if (more && state.feedbackCursor !== null) q.set('cursor', state.feedbackCursor)
  const page = await api('GET', `/api/v2/mgmt/feedback?${q}`)
  state.feedbackCursor = page.next_cursor
  const rows = page.entries.map((e) => {
    const actions = el('td', {})
    if (mayDelete(e)) {
      const del = el('button', { type: 'button', 'aria-label': `Delete feedback on ${e.indicator.value}` }, 'Delete')
      del.addEventListener('click', () => deleteFeedback(e, del))
      actions.append(del)
    }
    return el('tr', { 'data-id': e.id }, el('td', {}, e.created_at.slice(0, 19).replace('T', ' ')), el('td', {}, e.indicator.value),
      el('td', {}, e.verdict === 'false_positive' ? 'false positive' : 'true positive'), el('td', {}, e.score), el('td', {}, e.category),
      el('td', {}, e.signal_ids.join(' ')), el('td', {}, e.note), el('td', {}, e.created_by), actions)
  })
  if (more) $('#fbl-table tbody').append(...rows)
  else $('#fbl-table tbody').replaceChildren(...rows)
  $('#fbl-status').textContent = $('#fbl-table tbody').children.length === 0 ? 'No feedback matches.' : ''
  $('#fbl-next').hidden = page.next_cursor === null
}

async function deleteFeedback (e, button) {
  showError('')
  try {
    await api('DELETE', `/api/v2/mgmt/feedback/${encodeURIComponent(e.id)}`)
    const row = button.closest('tr')
    const next = row.nextElementSibling ?? row.previousElementSibling
    row.remove()
    $('#fbl-status').textContent = `Deleted the feedback on ${e.indicator.value}.`
    ;(next?.querySelector('button') ?? $('#fbl-verdict')).focus()
    await loadSummary()
  } catch (err) {
    showError(err.message)
  }
}

$('#summary-form').addEventListener('submit', (ev) => {
  ev.preventDefault()
  loadSummary().catch((e) => showError(e.message))
})
$('#fbl-form').addEventListener('submit', (ev) => {
  ev.preventDefault()
  loadFeedback(false).catch((e) => showError(e.message))
})
$('#fbl-next').addEventListener('click', () => loadFeedback(true).catch((e) => showError(e.message)))

// ---- retro-hunt page -------------------------------------------------------------------------------------------

const kMatchNames = { exact: 'listed', parent_domain: 'parent domain listed', containing_network: 'network listed', announcing_as: 'AS listed' }

async function loadRetroHits (more) {
  const q = new URLSearchParams({ limit: '50' })
  if ($('#retro-min').value !== '') q.set('min_score', $('#retro-min').value)
  if ($('#retro-category').value.trim() !== '') q.set('category', $('#retro-category').value.trim())
  if (more && state.retroCursor !== null) q.set('cursor', state.retroCursor)
  const page = await api('GET', `/api/v2/mgmt/retro-hunt/hits?${q}`)
  state.retroCursor = page.next_cursor
  const rows = page.hits.map((h) => {
    const look = el('button', { type: 'button', 'aria-label': `Look up ${h.indicator.value}` }, 'Look up')
    look.addEventListener('click', () => {
      // The Lookup page explains the verdict now: every signal with its evidence.
      show('lookup')
      $('#indicator').value = h.indicator.value
      $('#lookup-form').requestSubmit()
    })
    return el('tr', { 'data-id': h.id }, el('td', {}, h.found_at.slice(0, 19).replace('T', ' ')), el('td', {}, h.indicator.value), el('td', {}, h.indicator.type),
      el('td', {}, `${h.then.score} ${h.then.category}`), el('td', {}, h.now.score), el('td', {}, h.now.category),
      el('td', {}, `${kMatchNames[h.cause.match] ?? h.cause.match}: ${h.cause.listed_value} (${h.cause.source})`),
      el('td', {}, `${h.queried.count}x, last ${h.queried.last_at.slice(0, 10)}`), el('td', {}, look))
  })
  if (more) $('#retro-table tbody').append(...rows)
  else $('#retro-table tbody').replaceChildren(...rows)
  $('#retro-status').textContent = $('#retro-table tbody').children.length === 0 ? 'No retro-hunt hits match.' : ''
  $('#retro-next').hidden = page.next_cursor === null
}

$('#retro-form').addEventListener('submit', (ev) => {
  ev.preventDefault()
  loadRetroHits(false).catch((e) => showError(e.message))
})
$('#retro-next').addEventListener('click', () => loadRetroHits(true).catch((e) => showError(e.message)))

// ---- bulk ------------------------------------------------------------------------------------------------------

function bulkRow (r, i) {
  return {
    n: i + 1,
    value: r.indicator.value,
    type: r.indicator.type ?? '',
    normalized: r.indicator.normalized ?? '',
    score: r.risk?.score ?? null,
    strength: r.risk?.strength ?? '',
    category: r.risk?.category ?? (r.errors ?? []).join('; '),
    action: r.recommended_actions[0]?.action ?? '',
    signals: r.signals.map((s) => s.signal_id).join(' '),
    item: r
  }
}

function renderBulk () {
  const filter = $('#bulk-filter').value.trim().toLowerCase()
  const { key, dir } = state.sort
  const rows = state.bulkRows
    .filter((r) => filter === '' || `${r.value} ${r.type} ${r.score ?? ''} ${r.category} ${r.action} ${r.signals}`.toLowerCase().includes(filter))
    .sort((a, b) => (a[key] ?? -1) < (b[key] ?? -1) ? -dir : (a[key] ?? -1) > (b[key] ?? -1) ? dir : 0)
  // A page shows at most 2,000 rows at once so 10,000 results stay fast; the filter narrows them.
  const shown = rows.slice(0, 2000)
  $('#bulk-table tbody').replaceChildren(...shown.map((r) => el('tr', {},
    el('td', {}, r.n), el('td', {}, r.value), el('td', {}, r.type), el('td', {}, r.score ?? ''), el('td', {}, r.category), el('td', {}, r.action), el('td', {}, r.signals))))
  for (const b of document.querySelectorAll('#bulk-table th button')) {
    if (b.dataset.sort === key) b.parentElement.setAttribute('aria-sort', dir > 0 ? 'ascending' : 'descending')
    else b.parentElement.removeAttribute('aria-sort')
  }
  $('#bulk-count').textContent = `${rows.length} of ${state.bulkRows.length} results${rows.length > shown.length ? ` (first ${shown.length} shown; filter to narrow)` : ''}`
  $('#bulk-result').hidden = false
}

/**
 * The indicators of a CSV file: the first field of each record (RFC 4180 quoting, so a quoted field may hold commas
 * and doubled quotes), one per line; a first record that names the column (indicator, value, ioc) is left out.
 */
function csvFirstColumn (text) {
  const out = []
  for (const line of text.split(/\r?\n/)) {
    let field = ''
    if (line.startsWith('"')) {
      let i = 1
      for (; i < line.length; i++) {
        if (line[i] !== '"') {
          field += line[i]
        } else if (line[i + 1] === '"') {
          field += '"'
          i++
        } else {
          break
        }
      }
    } else {
      field = line.split(',')[0]
    }
    out.push(field.trim())
  }
  if (/^(indicators?|values?|iocs?)$/i.test(out[0] ?? '')) out.shift()
  return out.join('\n')
}

$('#bulk-file').addEventListener('change', () => {
  const file = $('#bulk-file').files[0]
  if (file === undefined) return
  const reader = new FileReader()
  reader.onload = () => { $('#bulk-input').value = /\.csv$/i.test(file.name) ? csvFirstColumn(String(reader.result)) : String(reader.result) }
  reader.readAsText(file)
})

$('#bulk-form').addEventListener('submit', async (ev) => {
  ev.preventDefault()
  showError('')
  const values = $('#bulk-input').value.split(/\r?\n/).map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('#'))
  if (values.length > 10000) return showError(`${values.length} indicators: at most 10,000 per bulk`)
  try {
    const answer = await api('POST', '/dashboard/api/bulk', { values })
    state.bulkRows = answer.results.map((r, i) => bulkRow(r, i))
    renderBulk()
  } catch (e) {
    showError(e.message)
  }
})

$('#bulk-filter').addEventListener('input', renderBulk)
for (const b of document.querySelectorAll('#bulk-table th button')) {
  b.addEventListener('click', () => {
    state.sort = { key: b.dataset.sort, dir: state.sort.key === b.dataset.sort ? -state.sort.dir : 1 }
    renderBulk()
  })
}

function download (name, type, text) {
  const a = el('a', { href: URL.createObjectURL(new Blob([text], { type })), download: name })
  document.body.append(a)
  a.click()
  a.remove()
}

const csvField = (v) => { const s = String(v ?? ''); const safe = /^[=+\-@\t\r]/.test(s) ? `'${s}` : s; return /[",\r\n']/.test(safe) ? `"${safe.replace(/"/g, '""')}"` : safe }
$('#download-csv').addEventListener('click', () => download('verdicts.csv', 'text/csv', ['value,type,normalized,score,strength,category,top_signals,error',
  ...state.bulkRows.map((r) => [r.value, r.type, r.normalized, r.score ?? '', r.strength, r.item.risk === null ? '' : r.category, r.signals, (r.item.errors ?? []).join('; ')].map(csvField).join(','))].join('\r\n') + '\r\n'))
$('#download-ndjson').addEventListener('click', () => download('verdicts.ndjson', 'application/x-ndjson', state.bulkRows.map((r) => JSON.stringify(r.item)).join('\n') + '\n'))

// ---- history ---------------------------------------------------------------------------------------------------

async function searchHistory (next) {
  const q = new URLSearchParams({ limit: '50' })
  if ($('#h-value').value.trim() !== '') q.set('indicator_value', $('#h-value').value.trim())
  if ($('#h-type').value !== '') q.set('indicator_type', $('#h-type').value)
  if ($('#h-from').value !== '') q.set('date_gte', $('#h-from').value)
  if ($('#h-to').value !== '') q.set('date_lt', $('#h-to').value)
  if ($('#h-nobulk').checked) q.set('exclude_bulk_requests', 'true')
  if (next && state.historyCursor !== null) q.set('cursor', state.historyCursor)
  let page = await api('GET', `/api/v2/mgmt/enrich-logs/search-history?${q}`)
  // A search of a large history may stop early with a short page (docs/API.md): read on, a few pages at most, to
  // show a full one.
  const results = [...page.results]
  for (let more = 0; results.length < 50 && page.next_cursor !== null && more < 10; more++) {
    q.set('cursor', page.next_cursor)
    page = await api('GET', `/api/v2/mgmt/enrich-logs/search-history?${q}`)
    results.push(...page.results)
  }
  state.historyCursor = page.next_cursor
  const rows = results.map((r) => el('tr', {},
    el('td', {}, r.date), el('td', {}, r.indicator.value), el('td', {}, r.indicator.type ?? ''), el('td', {}, r.risk?.score ?? ''),
    el('td', {}, r.risk?.category ?? ''), el('td', {}, r.user_id ?? r.apikey), el('td', {}, r.bulk_request_id ?? '')))
  if (next) $('#history-table tbody').append(...rows)
  else $('#history-table tbody').replaceChildren(...rows)
  $('#history-next').hidden = page.next_cursor === null
}

$('#history-form').addEventListener('submit', (ev) => {
  ev.preventDefault()
  searchHistory(false).catch((e) => showError(e.message))
})
$('#history-next').addEventListener('click', () => searchHistory(true).catch((e) => showError(e.message)))

// ---- usage -----------------------------------------------------------------------------------------------------

async function loadUsage () {
  const days = []
  for (let i = 6; i >= 0; i--) days.push(new Date(Date.now() - i * 86_400_000).toISOString().slice(0, 10))
  const reports = await Promise.all(days.map((d) => api('GET', `/api/v2/mgmt/usage?day=${d}`)))
  const max = Math.max(1, ...reports.map((r) => r.total))
  const w = 640
  const h = 200
  const bw = (w - 60) / days.length
  const root = svg('svg', { width: w, height: h + 40, viewBox: `0 0 ${w} ${h + 40}` })
  reports.forEach((r, i) => {
    const bh = (r.total / max) * h
    const g = svg('g', { 'data-day': r.day, 'data-total': r.total })
    g.append(svg('rect', { x: 40 + i * bw + 4, y: h - bh + 10, width: bw - 8, height: Math.max(1, bh), class: 'final' }))
    g.append(svg('text', { x: 40 + i * bw + 4, y: h + 26 }, r.day.slice(5)))
    g.append(svg('text', { x: 40 + i * bw + 4, y: h - bh + 6 }, r.total))
    root.append(g)
  })
  $('#usage-chart').replaceChildren(root)
  $('#usage-text').textContent = `Indicators queried by tenant ${state.session.tenant}, last 7 UTC days: ${reports.map((r) => `${r.day} ${r.total}`).join(', ')}. Quotas are per key: see each key's X-Quota-Remaining.`
}

// ---- intel -----------------------------------------------------------------------------------------------------

async function loadIntel () {
  const health = await api('GET', '/api/v2/ioc/health')
  const dl = $('#intel-snapshot')
  dl.replaceChildren(el('dt', {}, 'Snapshot version'), el('dd', {}, health.checks.intel.version), el('dt', {}, 'Data compiled'), el('dd', {}, health.checks.intel.data_timestamp),
    el('dt', {}, 'Service status'), el('dd', {}, health.status))
  // Feed sources are an admin's to see: an analyst's page does not ask (and log a 403).
  if (!state.session.permissions.includes('admin')) {
    $('#intel-sources').hidden = true
    return
  }
  try {
    const sources = await api('GET', '/api/v2/mgmt/intel/sources')
    $('#intel-sources tbody').replaceChildren(...sources.sources.map((s) => el('tr', {},
      el('td', {}, s.name), el('td', {}, s.status), el('td', {}, s.records ?? ''), el('td', {}, s.last_success_at ?? ''), el('td', {}, s.error ?? ''))))
    $('#intel-sources').hidden = false
  } catch {
    $('#intel-sources').hidden = true
  }
}

$('#intel-reload').addEventListener('click', async () => {
  $('#intel-message').textContent = 'Reloading…'
  try {
    const r = await api('POST', '/api/v2/mgmt/intel/reload')
    $('#intel-message').textContent = `Reloaded: snapshot ${r.version}, built in ${r.build_ms} ms.`
    await loadIntel()
  } catch (e) {
    $('#intel-message').textContent = ''
    showError(e.message)
  }
})

// ---- capacity --------------------------------------------------------------------------------------------------

async function loadCapacity () {
  const { available } = await api('GET', '/dashboard/api/capacity')
  $('#capacity-none').hidden = available
  $('#capacity-frame').hidden = !available
  if (available && $('#capacity-frame').getAttribute('src') === null) $('#capacity-frame').setAttribute('src', '/dashboard/capacity-report')
}

// ---- start -----------------------------------------------------------------------------------------------------

api('GET', '/dashboard/api/session').then(signedIn, () => signedOut())
