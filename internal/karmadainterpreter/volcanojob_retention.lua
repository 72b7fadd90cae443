-- Retain: what Karmada applies to a member's Volcano Job on an update.
--
-- The member admitted the Job through Volcano's mutating webhook, which fills in defaults the
-- template on the Karmada control plane does not carry (each task's maxRetry and minAvailable, the
-- task names, the queue, ...). Volcano's validating webhook then refuses every update that changes
-- a field under spec other than minAvailable, priorityClassName and each task's replicas and
-- minAvailable. So the member's spec is kept as it is, and only those fields come from the template
-- (when the template sets them). A template whose number of tasks differs is applied as it is:
-- Volcano refuses it, and the refusal shows in the Work's Applied condition.
function Retain(desiredObj, observedObj)
  local want = desiredObj.spec
  local have = observedObj.spec
  if want == nil or have == nil then
    return desiredObj
  end
  local wantTasks = want.tasks or {}
  local haveTasks = have.tasks or {}
  if #wantTasks ~= #haveTasks then
    return desiredObj
  end
  if want.minAvailable ~= nil then
    have.minAvailable = want.minAvailable
  end
  if want.priorityClassName ~= nil then
    have.priorityClassName = want.priorityClassName
  end
  for i = 1, #haveTasks do
    if wantTasks[i].replicas ~= nil then
      haveTasks[i].replicas = wantTasks[i].replicas
    end
    if wantTasks[i].minAvailable ~= nil then
      haveTasks[i].minAvailable = wantTasks[i].minAvailable
    end
  end
  desiredObj.spec = have
  return desiredObj
end
