/**
 * Example: keys and charges new Payment_Request__c records. All logic is in
 * PaymentRequestTriggerHandler.
 */
trigger PaymentRequestTrigger on Payment_Request__c(
  before insert,
  after insert
) {
  new PaymentRequestTriggerHandler().handle(Trigger.operationType, Trigger.new);
}
