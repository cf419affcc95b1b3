-- wrk script: every response must be 200 with a body equal to the file
-- given after `--` (wrk ... -s wrk_check.lua URL -- FILE); done() prints
-- "bodies: N exact, M differ" over all threads.
local threads = {}

function setup(thread)
	table.insert(threads, thread)
end

function init(args)
	local f = assert(io.open(args[1], "rb"))
	expected = f:read("*a")
	f:close()
	exact = 0
	differ = 0
end

function response(status, headers, body)
	if status == 200 and body == expected then
		exact = exact + 1
	else
		differ = differ + 1
	end
end

function done(summary, latency, requests)
	local e, d = 0, 0
	for _, t in ipairs(threads) do
		e = e + t:get("exact")
		d = d + t:get("differ")
	end
	io.write(string.format("bodies: %d exact, %d differ\n", e, d))
end
